#ifndef MLA_TAIL_TESTING_SUPPORT_FP8_H_
#define MLA_TAIL_TESTING_SUPPORT_FP8_H_

// e4m3 tensors of a tail problem on the GPU: W_UV in e4m3 with its block scales (compact, or the
// V half of a checkpoint's kv_b_proj with the K half poisoned), and an e4m3 output with its
// scales, NaN-poisoned with padding and guard rows, checked bit for bit against the e4m3
// quantization (reference.h's QuantizeHead) of a bf16 output.

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/fp8_data.h"
#include "testing/support/problem.h"
#include "testing/support/reference.h"

namespace mla_tail_testing {

class Fp8Weights {
 public:
  static absl::StatusOr<std::unique_ptr<Fp8Weights>> Create(int heads,
                                                            const Fp8WeightOptions& options);
  // Points `buffers` at the e4m3 W_UV and its scales (w_uv cleared).
  void Apply(mla_tail::TailBuffers* buffers) const;
  // Makes `in` read the e4m3 W_UV and its scales.
  void Apply(ReferenceInputs* in) const;

 private:
  Fp8Weights() = default;
  int64_t w_offset_ = 0, w_head_stride_ = 0, w_row_stride_ = 0, scale_offset_ = 0,
          scale_head_stride_ = 0;
  DeviceMemory w_, scales_;
  std::vector<uint8_t> w_host_;
  std::vector<float> scales_host_;
};

class Fp8Output {
 public:
  // An e4m3 output of `shape` with 16 padding columns a row and `guard_rows` rows after it, and
  // its scales, [rows, heads + 3] or, with `head_major`, [heads, rows + guard_rows + 4] (row
  // stride 1); all filled with NaN.
  static absl::StatusOr<std::unique_ptr<Fp8Output>> Create(const mla_tail::TailShape& shape,
                                                           bool head_major, int guard_rows = 16);
  // Points `buffers` at this output (output cleared).
  void Apply(mla_tail::TailBuffers* buffers) const;
  absl::Status Poison(cudaStream_t stream) const;

  // Checks every (row, head) of the batch bit for bit against QuantizeHead of the bf16 values
  // `bf16(t, column)` (the bf16 tail's output; NaN codes and NaN scales match any NaN), and that
  // padding columns, guard rows and unused scale entries still hold NaN. With `live_rows` >= 0,
  // rows at and past it (values and scales) are checked to hold NaN still, as a row count keeps
  // the tail off them.
  absl::Status Check(const std::function<uint16_t(int t, int column)>& bf16,
                     int live_rows = -1) const;
  // Nothing written: every byte still NaN.
  absl::Status CheckUntouched() const;

 private:
  Fp8Output() = default;
  mla_tail::TailShape shape_;
  int guard_rows_ = 0;
  int64_t row_stride_ = 0, scale_row_stride_ = 0, scale_head_stride_ = 0;
  size_t scale_count_ = 0;
  DeviceMemory values_, scales_;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_FP8_H_

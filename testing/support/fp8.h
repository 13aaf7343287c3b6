#ifndef MLA_TAIL_TESTING_SUPPORT_FP8_H_
#define MLA_TAIL_TESTING_SUPPORT_FP8_H_

// e4m3 tensors of a tail problem on the GPU: W_UV in e4m3 with its block scales (compact, or the
// V half of a checkpoint's kv_b_proj with the K half poisoned), and an e4m3 output with its
// scales (row- or head-major, with or without gaps), filled with NaN or a finite byte, with
// padding, guard rows and a guard before each allocation's first byte, checked bit for bit
// against the e4m3 quantization (reference.h's QuantizeHead) of a bf16 output.

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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

// How an Fp8Output lays out its scales.
struct Fp8OutputOptions {
  // Scales [heads, rows + guard_rows] (row stride `scale_spacing`, head stride (rows +
  // guard_rows) * scale_spacing + 4) instead of [rows + guard_rows, heads] (head stride
  // `scale_spacing`, row stride heads * scale_spacing + 3).
  bool head_major = false;
  int guard_rows = 16;  // rows after the batch, values and scales, that must stay untouched
  // The stride between the scales of one row (row-major) or of one head (head-major); above 1
  // the entries between them are gaps that must stay untouched.
  int64_t scale_spacing = 1;
};

// What Fp8Output::Poison fills the values and the scales with, one byte repeated: NaN (0xff:
// e4m3 NaN, FP32 0xffffffff NaN), or finite (0x5a: e4m3 20, FP32 0x5a5a5a5a about 1.5e16), under
// which a NaN result the tail failed to store shows.
struct Fp8Fill {
  uint8_t value_byte;
  uint8_t scale_byte;
};
inline constexpr Fp8Fill kNanFill = {0xff, 0xff};
inline constexpr Fp8Fill kFiniteFill = {0x5a, 0x5a};

// An Fp8Output's bits, read back.
struct Fp8OutputBits {
  std::vector<uint8_t> values;   // the allocation, its leading guard included
  std::vector<uint32_t> scales;  // the same
  int64_t value_offset = 0, row_stride = 0;
  int64_t scale_offset = 0, scale_row_stride = 0, scale_head_stride = 0;
  uint8_t value(int t, int64_t column) const {
    return values[value_offset + t * row_stride + column];
  }
  uint32_t scale(int t, int h) const {
    return scales[scale_offset + t * scale_row_stride + h * scale_head_stride];
  }
};

class Fp8Output {
 public:
  // An e4m3 output of `shape` with 16 padding columns a row and `options.guard_rows` rows after
  // it, and its scales (Fp8OutputOptions). Each allocation begins with a guard the buffers do not
  // include (two rows of values, 16 bytes of scales; the buffers stay 16-byte aligned) that holds
  // kGuardByte and must keep it. The rest filled with NaN.
  static absl::StatusOr<std::unique_ptr<Fp8Output>> Create(const mla_tail::TailShape& shape,
                                                           const Fp8OutputOptions& options);
  static absl::StatusOr<std::unique_ptr<Fp8Output>> Create(const mla_tail::TailShape& shape,
                                                           bool head_major, int guard_rows = 16);
  static constexpr uint8_t kGuardByte = 0xa5;  // e4m3 -0.203125; FP32 about -2.9e-16

  // Points `buffers` at this output (output cleared).
  void Apply(mla_tail::TailBuffers* buffers) const;
  // Writes the guards and fills the rest with `fill`, which the checks below then expect of what
  // the tail must not write.
  absl::Status Poison(cudaStream_t stream, Fp8Fill fill = kNanFill) const;

  // Checks every (row, head) of the batch bit for bit against QuantizeHead of the bf16 values
  // `bf16(t, column)` (the bf16 tail's output; NaN codes and NaN scales match any NaN), and that
  // padding columns, guard rows and unused scale entries still hold the fill and the leading
  // guards theirs. With `live_rows` >= 0, rows at and past it (values and scales) are checked to
  // hold the fill still, as a row count keeps the tail off them.
  absl::Status Check(const std::function<uint16_t(int t, int column)>& bf16,
                     int live_rows = -1) const;
  // Nothing written: the guards and the fill as Poison left them.
  absl::Status CheckUntouched() const;
  absl::StatusOr<Fp8OutputBits> Read() const;

 private:
  Fp8Output() = default;
  // The first byte of the leading guards that lost its pattern, described; empty if none.
  std::string CheckGuards(const Fp8OutputBits& bits) const;

  mla_tail::TailShape shape_;
  int guard_rows_ = 0;
  int64_t row_stride_ = 0, scale_row_stride_ = 0, scale_head_stride_ = 0;
  int64_t value_offset_ = 0, scale_offset_ = 0;  // the leading guards: bytes, scale entries
  size_t scale_count_ = 0;                       // entries after the guard
  DeviceMemory values_, scales_;
  // The fill of the last Poison, which the checks expect where nothing may be written.
  mutable Fp8Fill fill_ = kNanFill;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_FP8_H_

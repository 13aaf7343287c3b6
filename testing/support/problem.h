#ifndef MLA_TAIL_TESTING_SUPPORT_PROBLEM_H_
#define MLA_TAIL_TESTING_SUPPORT_PROBLEM_H_

// A tail problem on the GPU for tests, benchmarks and the demo: device inputs filled with
// deterministic test values (problem_data.h: optionally strided, with inactive requests poisoned
// by NaN and special values in active rows), an output with NaN-filled guard bands (rows after
// it, and two rows before the problem's own output), and host copies of the device's inputs for
// the CPU reference.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/problem_data.h"
#include "testing/support/reference.h"

namespace mla_tail_testing {

// Device memory owned for a scope.
class DeviceMemory {
 public:
  static absl::StatusOr<DeviceMemory> Allocate(size_t bytes);
  // Frees what it holds and allocates `bytes`; on failure it holds nothing.
  absl::Status Reset(size_t bytes);
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& other) noexcept { *this = std::move(other); }
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  ~DeviceMemory();
  void* get() const { return pointer_; }
  size_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(pointer_);
  }

 private:
  void* pointer_ = nullptr;
  size_t bytes_ = 0;
};

class Problem {
 public:
  static absl::StatusOr<std::unique_ptr<Problem>> Create(const ProblemOptions& options,
                                                         cudaStream_t stream = nullptr);

  const ProblemOptions& options() const { return options_; }
  const mla_tail::TailShape& shape() const { return options_.shape; }
  // The buffers with the problem's own output, or another output of the same layout.
  mla_tail::TailBuffers buffers() const { return buffers_; }
  mla_tail::TailBuffers buffers_with_output(mla_tail::bf16* output) const;
  size_t output_elements() const;  // the output allocation, guard band included

  // Another output allocation of the problem's layout (output_elements()), filled with NaN.
  absl::StatusOr<DeviceMemory> NewOutput(cudaStream_t stream) const;
  // Fills an output allocation (of output_elements()) with NaN; for the problem's own output, the
  // guard band before it too.
  absl::Status PoisonOutput(mla_tail::bf16* output, cudaStream_t stream) const;
  // Writes new lengths (one per request) to the device.
  absl::Status SetLengths(const std::vector<int32_t>& lengths, cudaStream_t stream);

  // Host copies of the inputs (downloaded once) for the reference.
  ReferenceInputs reference_inputs() const;
  const std::vector<int32_t>& lengths() const { return lengths_; }

  // Checks an output allocation against the reference on `rows` (all columns), that every
  // element of every row < B was written (no NaN but where a special value puts one), and that
  // padding columns and guard rows (for the problem's own output, those before it too) still
  // hold NaN. Returns the first few mismatches as an error.
  // With `live_rows` >= 0, rows at and past it are checked to hold NaN still (a row count kept
  // the tail off them) and only `rows` below it against the reference.
  absl::Status Check(const mla_tail::bf16* output, const std::vector<int>& rows, bool exact,
                     int live_rows = -1) const;
  // The same against the reference of other inputs (`in`: the problem's with e4m3 W_UV, say).
  absl::Status Check(const mla_tail::bf16* output, const std::vector<int>& rows, bool exact,
                     const ReferenceInputs& in, int live_rows = -1) const;

  // Rows worth checking (problem_data.h's SampleRows).
  std::vector<int> SampleRows(int random_rows = 4) const;

 private:
  explicit Problem(const ProblemOptions& options) : options_(options) {}
  // Whether a special value makes active output (t, column) NaN.
  bool NanExpected(int64_t t, int64_t column) const;

  ProblemOptions options_;
  DeviceMemory latent_, w_uv_, gate_, lengths_device_, output_;
  // Elements of output_ before the problem's own output (a guard band: two rows, rounded up to
  // 256 bytes so that the output keeps its alignment).
  int64_t output_lead_ = 0;
  mla_tail::TailBuffers buffers_;
  int64_t w_allocation_offset_ = 0;
  std::vector<uint16_t> latent_host_, w_uv_host_, gate_host_;
  std::vector<int32_t> lengths_;
  // Where special values make an active output NaN: (row, head), (head, column), (row, column).
  std::set<std::pair<int64_t, int64_t>> nan_latent_, nan_weight_, nan_gate_;
};

// Downloads an output allocation as bf16 bits.
absl::StatusOr<std::vector<uint16_t>> DownloadBits(const mla_tail::bf16* device, size_t elements);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_PROBLEM_H_

#ifndef MLA_TAIL_MLA_INTERNAL_VALUE_BMM_H_
#define MLA_TAIL_MLA_INTERNAL_VALUE_BMM_H_

// The W_UV projection as one cuBLASLt batched GEMM, a batch entry per head:
//   values[h, t, :] = latent[t, h, :] (1 x 512) . W_UV[h] (512 x 128), BF16 in/out, FP32 compute.
// In cuBLASLt's column-major terms, per head: D (128 x B, ld 128) = op_T(A) . B where
// A = W_UV[h] seen as 512 x 128 with ld = w_row_stride, and B = latent[:, h, :] seen as
// 512 x B with ld = latent_row_stride.
//
// A plan (descriptors and the heuristic's algorithm) is made once per shape, outside any stream
// capture, and kept; running it enqueues only the GEMM, so it can be captured into a graph.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla/internal/fault_hooks.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

struct ValueBmmShape {
  int heads = 0;                  // batch count
  int rows = 0;                   // B
  int64_t latent_row_stride = 0;  // ld of B
  int64_t w_row_stride = 0;       // ld of A
};

// A pointer-array batched GEMM: the per-head operand addresses are read from device arrays at
// run time (BmmPointersKernel writes them), so that a graph holding the GEMM never changes.
class ValueBmm {
 public:
  // Plans the GEMM for `shape` with the process's cuBLASLt (CublasLt(), which made
  // `handle`); NotFound when cuBLASLt has no algorithm for it within `workspace_bytes` and
  // 16-byte operand alignment (or when `faults` says to act so).
  static absl::StatusOr<ValueBmm> Create(cublasLtHandle_t handle, const ValueBmmShape& shape,
                                         size_t workspace_bytes,
                                         const FaultHooks& faults = ActiveFaultHooks());

  // Device arrays of H addresses each: W_UV, latent and values of each head.
  absl::Status RunPointerArray(const void* const* w_uv_table, const void* const* latent_table,
                               void* const* values_table, void* workspace,
                               cudaStream_t stream) const;

  const ValueBmmShape& shape() const { return shape_; }

 private:
  struct Descriptors;
  ValueBmm(ValueBmmShape shape, cublasLtHandle_t handle, std::shared_ptr<Descriptors> descriptors,
           size_t workspace_bytes);

  ValueBmmShape shape_;
  cublasLtHandle_t handle_;
  std::shared_ptr<Descriptors> descriptors_;  // immutable after Create; shared by copies
  size_t workspace_bytes_;
};

// cuBLASLt status as absl::Status naming `what`.
absl::Status CublasStatus(cublasStatus_t status, const char* what);

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_VALUE_BMM_H_

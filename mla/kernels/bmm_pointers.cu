// Writes the per-head operand addresses of the pointer-array batched GEMM and the gate's operands.
// As a kernel node of a captured graph its parameters are all of the caller's pointers, so a
// pointer update is one kernel-node parameter update and the GEMM and gate nodes never change.

#include <cuda_runtime.h>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"

namespace mla_tail::internal {
namespace {

__global__ void BmmPointersKernel(const BmmPointerParams p) {
  // The tables may still be read by an earlier GEMM or gate of this stream until upstream
  // completes.
  device::GridDependencyWait();
  const int h = threadIdx.x;
  if (h < p.heads) {
    p.a_table[h] = p.w_uv + h * p.w_head_stride;
    p.b_table[h] = p.latent + h * kLatentDim;
    p.d_table[h] = p.values + static_cast<int64_t>(h) * p.rows * kValueDim;
  }
  if (h == 0) *p.gate_table = p.gate;
  device::LaunchDependents();
}

}  // namespace

cudaError_t LoadBmmPointers() { return LoadKernel(BmmPointersKernel, 0); }

KernelLaunch PlanBmmPointers() {
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(BmmPointersKernel);
  launch.grid = dim3(1);
  launch.block = dim3(kMaxHeads);
  return launch;
}

}  // namespace mla_tail::internal

#ifndef MLA_TAIL_MLA_KERNELS_LAUNCH_H_
#define MLA_TAIL_MLA_KERNELS_LAUNCH_H_

// Choosing, launching and loading the kernels (host code). Launches validate nothing: the
// callers (mla/tail.h, graph/) have checked every shape, stride and pointer.

#include <cuda_runtime_api.h>

#include <cstddef>

#include "mla/kernels/params.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {

// One kernel launch: what cudaLaunchKernelEx takes, and what a graph's kernel node holds. The
// kernel's only argument is its params struct.
struct KernelLaunch {
  const void* function = nullptr;
  dim3 grid;
  dim3 block;
  unsigned int smem_bytes = 0;
};

// Enqueues `launch` with `*params` as the kernel's argument (cudaLaunchKernelEx): every launch
// of the library's kernels. With `pdl` the launch carries the programmatic-stream-serialization
// attribute: it may begin while the kernel before it in the stream runs (the kernel waits
// before reading what upstream kernels write), and captured into a graph its edge is
// programmatic.
cudaError_t LaunchKernel(const KernelLaunch& launch, const void* params, cudaStream_t stream,
                         bool pdl);

// LaunchKernel for a kernel function and its params struct.
template <typename Params>
cudaError_t LaunchWithPdl(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, bool pdl, const Params& params) {
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(kernel);
  launch.grid = grid;
  launch.block = block;
  launch.smem_bytes = static_cast<unsigned int>(smem_bytes);
  return LaunchKernel(launch, &params, stream, pdl);
}

// Loads `kernel` on the current device now (cudaFuncGetAttributes makes the runtime load it)
// and lets it use `smem_bytes` of dynamic shared memory (more than 48 KB needs an opt-in); a
// kernel launched in clusters gets the load-balancing cluster scheduling policy. CUDA
// otherwise loads each kernel at its first launch or graph instantiation; loaded when the tail
// is created, none is loaded during a decode step or on a device the runtime has filled since.
cudaError_t LoadKernel(const void* kernel, size_t smem_bytes);

template <typename Params>
cudaError_t LoadKernel(void (*kernel)(Params), size_t smem_bytes) {
  return LoadKernel(reinterpret_cast<const void*>(kernel), smem_bytes);
}

// The multiprocessors of `device`, asked of CUDA once per device.
cudaError_t MultiprocessorCount(int device, int* count);

// The kernel that `kernel` runs for a shape, weight and output type on a GPU of
// `multiprocessors` SMs: `kernel` itself, or for kAuto the rule's choice (mla/dispatch.h).
FusedKernel ResolveFusedKernel(FusedKernel kernel, int heads, int rows, int multiprocessors,
                               WeightType weight = WeightType::kBf16,
                               OutputType output = OutputType::kBf16);

// Rows of latent per ColumnSplit block: 8 (loaded into registers), 16 or 32 (staged in shared
// memory). Each block keeps its 32 W_UV columns (64 with e4m3 W_UV) in registers across its
// rows, so larger blocks re-read W_UV less often.
int ColumnSplitBlockRows(int heads, int rows, int multiprocessors,
                         WeightType weight = WeightType::kBf16);

// The fused kernel's launch for `params` on a GPU of `multiprocessors` SMs: the one mapping from
// (FusedKernel, shape, gate or none) to a kernel, used by the eager launch and by every graph
// node. With and without a gate the launch differs only in its function.
cudaError_t PlanFusedKernel(const FusedTailParams& params, FusedKernel kernel, int multiprocessors,
                            KernelLaunch* launch);

// Loads every kernel of the tail on the current device (LoadKernel), the fused kernels with
// their shared memory. Once per device before their first launch, outside any stream capture.
cudaError_t LoadTailKernels();

// The BMM path's kernels: BmmPointersKernel before the cuBLASLt GEMM (a BmmPointerParams its
// argument), BmmGateKernel after it (a BmmGateParams), with the gate (`gated`: the operands'
// gate is non-null) or without.
KernelLaunch PlanBmmPointers();
KernelLaunch PlanBmmGate(int heads, int rows, bool gated);
cudaError_t LoadBmmPointers();
cudaError_t LoadBmmGate();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_KERNELS_LAUNCH_H_

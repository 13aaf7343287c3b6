// Which fused kernel runs for a shape: the one place that maps FusedKernel and a shape to a kernel
// launch, for the eager launch and for graph nodes; and the one place that loads every kernel of
// the tail.

#include <cuda_runtime.h>

#include <atomic>
#include <initializer_list>

#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {

cudaError_t MultiprocessorCount(int device, int* count) {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices];
  if (device >= 0 && device < kDevices &&
      (*count = cached[device].load(std::memory_order_relaxed)) > 0) {
    return cudaSuccess;
  }
  const cudaError_t e = cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess && device >= 0 && device < kDevices) {
    cached[device].store(*count, std::memory_order_relaxed);
  }
  return e;
}

FusedKernel ResolveFusedKernel(FusedKernel kernel, int heads, int rows, int multiprocessors) {
  return kernel != FusedKernel::kAuto ? kernel : DispatchFusedKernel(heads, rows, multiprocessors);
}

cudaError_t PlanFusedKernel(const FusedTailParams& p, FusedKernel kernel, int multiprocessors,
                            KernelLaunch* launch) {
  const FusedKernel resolved = ResolveFusedKernel(kernel, p.heads, p.rows, multiprocessors);
  if (resolved == FusedKernel::kPersistent128x128) {
    *launch = PlanPersistent128x128(p.heads, p.rows, multiprocessors);
    return cudaSuccess;
  }
  if (resolved == FusedKernel::kLatentSplit) {
    *launch = PlanLatentSplit(p.heads, p.rows);
    return cudaSuccess;
  }
  if (IsTileKernel(resolved)) return PlanTile(p.heads, p.rows, resolved, launch);
  *launch = PlanColumnSplit(p.heads, p.rows, multiprocessors);
  return cudaSuccess;
}

cudaError_t LoadTailKernels() {
  for (cudaError_t (*load)() : {LoadColumnSplit, LoadLatentSplit, LoadTileKernels,
                                LoadPersistent128x128, LoadBmmGate, LoadBmmPointers}) {
    const cudaError_t e = load();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace mla_tail::internal

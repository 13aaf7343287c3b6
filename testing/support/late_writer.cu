#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.h"
#include "testing/support/late_writer.h"

namespace mla_tail_testing {
namespace {

struct LateWriterParams {
  LateCopy copies[3];
  unsigned delay_ns;
};

__device__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// The whole grid copies c: 16-byte words, then the last bytes % 16 one by one (lengths of a
// few requests are not a multiple of 16 bytes).
__device__ void CopyBytes(const LateCopy& c) {
  const uint4* src = static_cast<const uint4*>(c.src);
  uint4* dst = static_cast<uint4*>(c.dst);
  const size_t thread = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  for (size_t i = thread; i < c.bytes / 16; i += size_t{gridDim.x} * blockDim.x) dst[i] = src[i];
  if (thread < c.bytes % 16) {
    const size_t i = c.bytes / 16 * 16 + thread;
    static_cast<char*>(c.dst)[i] = static_cast<const char*>(c.src)[i];
  }
}

__global__ void LateWriterKernel(const LateWriterParams p) {
  mla_tail::internal::device::LaunchDependents();
  const uint64_t start = GlobalTimer();
  while (GlobalTimer() - start < p.delay_ns) {
  }
  for (const LateCopy& c : p.copies) CopyBytes(c);
}

struct WaitingCopyParams {
  LateCopy copy;
};

__global__ void WaitingCopyKernel(const WaitingCopyParams p) {
  mla_tail::internal::device::GridDependencyWait();
  CopyBytes(p.copy);
}

}  // namespace

cudaError_t LaunchWaitingCopy(const LateCopy& copy, cudaStream_t stream) {
  return mla_tail::internal::LaunchWithPdl(WaitingCopyKernel, dim3(8), dim3(256), 0, stream,
                                           /*pdl=*/true, WaitingCopyParams{copy});
}

cudaError_t LaunchLateWriter(const LateCopy (&copies)[3], unsigned delay_ns, cudaStream_t stream) {
  LateWriterParams p{{copies[0], copies[1], copies[2]}, delay_ns};
  // Few blocks, so that the dependent grid has room to start beside it.
  return mla_tail::internal::LaunchWithPdl(LateWriterKernel, dim3(8), dim3(256), 0, stream,
                                           /*pdl=*/false, p);
}

}  // namespace mla_tail_testing

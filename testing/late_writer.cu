#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "testing/late_writer.h"

namespace mla_testing {
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

__global__ void LateWriterKernel(const LateWriterParams p) {
  mla::device::LaunchDependents();
  const uint64_t start = GlobalTimer();
  while (GlobalTimer() - start < p.delay_ns) {
  }
  for (const LateCopy& c : p.copies) {
    const uint4* src = static_cast<const uint4*>(c.src);
    uint4* dst = static_cast<uint4*>(c.dst);
    for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < c.bytes / 16;
         i += size_t{gridDim.x} * blockDim.x) {
      dst[i] = src[i];
    }
  }
}

struct WaitingCopyParams {
  LateCopy copy;
};

__global__ void WaitingCopyKernel(const WaitingCopyParams p) {
  mla::device::GridDependencyWait();
  const uint4* src = static_cast<const uint4*>(p.copy.src);
  uint4* dst = static_cast<uint4*>(p.copy.dst);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < p.copy.bytes / 16;
       i += size_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

cudaError_t LaunchWaitingCopy(const LateCopy& copy, cudaStream_t stream) {
  return mla::LaunchWithPdl(WaitingCopyKernel, dim3(8), dim3(256), 0, stream, /*pdl=*/true,
                            WaitingCopyParams{copy});
}

cudaError_t LaunchLateWriter(const LateCopy (&copies)[3], unsigned delay_ns, cudaStream_t stream) {
  LateWriterParams p{{copies[0], copies[1], copies[2]}, delay_ns};
  // Few blocks, so that the dependent grid has room to start beside it.
  return mla::LaunchWithPdl(LateWriterKernel, dim3(8), dim3(256), 0, stream, /*pdl=*/false, p);
}

}  // namespace mla_testing

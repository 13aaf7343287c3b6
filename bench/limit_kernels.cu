#include <cuda_runtime.h>

#include <cstdint>

#include "bench/limit_kernels.h"
#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.h"

namespace mla_tail_bench {
namespace {

struct FloorParams {
  int unused;
};

__global__ void FloorKernel(const FloorParams) {
  mla_tail::internal::device::GridDependencyWait();
  mla_tail::internal::device::LaunchDependents();
}

struct CopyParams {
  const uint4* src;
  uint4* dst;
  size_t words;
};

__global__ void CopyKernel(const CopyParams p) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < p.words;
       i += size_t{gridDim.x} * blockDim.x) {
    p.dst[i] = p.src[i];
  }
}

struct UpstreamParams {
  unsigned busy_ns, epilogue_ns;
  uint4* output;  // rewritten (same values) at the start of the epilogue, as attention writes its
  size_t output_words;  // output, the tail's latent, last
};

__device__ uint64_t GlobalTimer() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__device__ void SpinUntil(uint64_t end) {
  while (GlobalTimer() < end) {
  }
}

__global__ void UpstreamKernel(const UpstreamParams p) {
  mla_tail::internal::device::GridDependencyWait();
  const uint64_t start = GlobalTimer();
  SpinUntil(start + p.busy_ns);
  __syncthreads();
  mla_tail::internal::device::LaunchDependents();
  const uint64_t epilogue_end = GlobalTimer() + p.epilogue_ns;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < p.output_words;
       i += size_t{gridDim.x} * blockDim.x) {
    uint4 v = p.output[i];
    asm volatile("" : "+r"(v.x));  // an opaque value: the store is not elided
    p.output[i] = v;
  }
  SpinUntil(epilogue_end);
}

}  // namespace

cudaError_t LaunchUpstreamKernel(int blocks, unsigned busy_ns, unsigned epilogue_ns,
                                 size_t smem_bytes, void* output, size_t output_bytes,
                                 cudaStream_t stream, bool pdl) {
  if (smem_bytes > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        UpstreamKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
    if (e != cudaSuccess) return e;
  }
  return mla_tail::internal::LaunchWithPdl(
      UpstreamKernel, dim3(blocks), dim3(128), smem_bytes, stream, pdl,
      UpstreamParams{busy_ns, epilogue_ns, static_cast<uint4*>(output), output_bytes / 16});
}

cudaError_t LaunchFloorKernel(int blocks, cudaStream_t stream, bool pdl) {
  return mla_tail::internal::LaunchWithPdl(FloorKernel, dim3(blocks), dim3(128), 0, stream, pdl,
                                           FloorParams{0});
}

cudaError_t LaunchCopyKernel(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const CopyParams p{static_cast<const uint4*>(src), static_cast<uint4*>(dst), bytes / 16};
  return mla_tail::internal::LaunchWithPdl(CopyKernel, dim3(sms * 8), dim3(256), 0, stream, false,
                                           p);
}

}  // namespace mla_tail_bench

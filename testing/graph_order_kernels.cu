#include <cuda_runtime.h>

#include "testing/graph_order_kernels.h"

namespace mla_tail_testing {
namespace {

__device__ uint64_t GlobalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void LateWriteEntry(const LateWrite p) {
  if (p.trigger_first) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const uint64_t start = GlobalTimer();
  while (GlobalTimer() - start < p.delay_ns) {
  }
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < p.words;
       i += size_t{gridDim.x} * blockDim.x) {
    p.buffer[i] = p.value;
  }
}

__global__ void StaleReadEntry(const StaleRead p) {
  if (p.wait_first) asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned long long stale = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < p.words;
       i += size_t{gridDim.x} * blockDim.x) {
    stale += p.buffer[i] != p.expected;
  }
  if (stale != 0) atomicAdd(p.stale, stale);
}

template <typename Params>
cudaError_t Launch(void (*kernel)(Params), unsigned blocks, const Params& p, bool pdl,
                   cudaStream_t stream) {
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, p);
}

}  // namespace

const void* LateWriteKernel() { return reinterpret_cast<const void*>(&LateWriteEntry); }
const void* StaleReadKernel() { return reinterpret_cast<const void*>(&StaleReadEntry); }

cudaError_t LaunchLateWrite(const LateWrite& p, bool pdl, cudaStream_t stream) {
  return Launch(LateWriteEntry, kWriterBlocks, p, pdl, stream);
}

cudaError_t LaunchStaleRead(const StaleRead& p, bool pdl, cudaStream_t stream) {
  return Launch(StaleReadEntry, kReaderBlocks, p, pdl, stream);
}

}  // namespace mla_tail_testing

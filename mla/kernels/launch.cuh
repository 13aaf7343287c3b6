#ifndef MLA_TAIL_MLA_KERNELS_LAUNCH_CUH_
#define MLA_TAIL_MLA_KERNELS_LAUNCH_CUH_

#include <cuda_runtime.h>

#include "mla/kernels/kernel_attributes.h"

namespace mla_tail {

// Launches `kernel(params)` with cudaLaunchKernelEx; with `pdl`, the launch may begin while the
// previous kernel in the stream runs (the kernel itself waits before reading its inputs).
template <typename Params>
cudaError_t LaunchWithPdl(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, bool pdl, const Params& params) {
  cudaLaunchAttribute attributes[1];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, params);
}

// Loads `kernel` on the current device now (cudaFuncGetAttributes makes the runtime load it) and
// lets it use `smem_bytes` of dynamic shared memory (more than 48 KB needs an opt-in). CUDA
// otherwise loads each kernel at its first launch or graph instantiation; loaded when the tail
// is created, none is loaded during a decode step or on a device the runtime has filled since.
template <typename Params>
cudaError_t LoadKernel(void (*kernel)(Params), size_t smem_bytes) {
  cudaFuncAttributes attributes;
  const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
  if (e != cudaSuccess || smem_bytes <= 48 * 1024) return e;
  return SetMaxDynamicSharedMemory(reinterpret_cast<const void*>(kernel),
                                   static_cast<int>(smem_bytes));
}

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_KERNELS_LAUNCH_CUH_

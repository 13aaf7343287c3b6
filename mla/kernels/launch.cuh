#ifndef MLA_KERNELS_LAUNCH_CUH_
#define MLA_KERNELS_LAUNCH_CUH_

#include <cuda_runtime.h>

namespace mla {

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

// Loads `kernel` on the current device now and lets it use `smem_bytes` of dynamic shared memory
// (more than 48 KB needs an opt-in). CUDA loads kernels lazily, at their first launch or graph
// instantiation, and a load takes device memory: a runtime that fills the device first (its KV
// cache) would see that load fail, and CUDA then refuses the kernel for the rest of the process
// (cudaErrorLaunchOutOfResources). cudaFuncGetAttributes makes the runtime load it.
template <typename Params>
cudaError_t LoadKernel(void (*kernel)(Params), size_t smem_bytes) {
  cudaFuncAttributes attributes;
  const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
  if (e != cudaSuccess || smem_bytes <= 48 * 1024) return e;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem_bytes));
}

}  // namespace mla

#endif  // MLA_KERNELS_LAUNCH_CUH_

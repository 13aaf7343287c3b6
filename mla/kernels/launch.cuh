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

}  // namespace mla

#endif  // MLA_KERNELS_LAUNCH_CUH_

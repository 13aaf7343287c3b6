#include "mla/kernels/kernel_attributes.h"

#include <cuda.h>
#include <cuda_runtime.h>

namespace mla_tail {

cudaError_t SetMaxDynamicSharedMemory(const void* kernel, int bytes) {
  using SetAttribute = CUresult (*)(CUfunction, CUfunction_attribute, int);
  static const SetAttribute set_attribute = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuFuncSetAttribute", &entry, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return SetAttribute{nullptr};
    }
    return reinterpret_cast<SetAttribute>(entry);
  }();
  if (set_attribute == nullptr) return cudaErrorSymbolNotFound;
  cudaFunction_t function = nullptr;
  const cudaError_t e = cudaGetFuncBySymbol(&function, kernel);
  if (e != cudaSuccess) return e;
  return set_attribute(reinterpret_cast<CUfunction>(function),
                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes) == CUDA_SUCCESS
             ? cudaSuccess
             : cudaErrorInvalidValue;
}

}  // namespace mla_tail

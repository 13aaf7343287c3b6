#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "testing/support/kernel_state.h"

namespace mla_tail_testing {
namespace {

__global__ void NeverLaunched(int* out) { *out = 1; }

template <typename Function>
cudaError_t DriverEntry(const char* symbol, unsigned int version, Function* function) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &entry, version, cudaEnableDefault, &found);
  if (e != cudaSuccess) return e;
  if (found != cudaDriverEntryPointSuccess || entry == nullptr) return cudaErrorNotSupported;
  *function = reinterpret_cast<Function>(entry);
  return cudaSuccess;
}

}  // namespace

cudaError_t LazyLoading(bool* lazy) {
  PFN_cuModuleGetLoadingMode_v11070 get_mode = nullptr;
  if (const cudaError_t e = DriverEntry("cuModuleGetLoadingMode", 11070, &get_mode);
      e != cudaSuccess) {
    return e;
  }
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  if (get_mode(&mode) != CUDA_SUCCESS) return cudaErrorUnknown;
  *lazy = mode == CU_MODULE_LAZY_LOADING;
  return cudaSuccess;
}

cudaError_t KernelIsLoaded(const void* function, bool* loaded) {
  PFN_cuFuncIsLoaded_v12040 is_loaded = nullptr;
  if (const cudaError_t e = DriverEntry("cuFuncIsLoaded", 12040, &is_loaded); e != cudaSuccess) {
    return e;
  }
  cudaFunction_t handle = nullptr;
  if (const cudaError_t e = cudaGetFuncBySymbol(&handle, function); e != cudaSuccess) return e;
  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
  if (is_loaded(&state, reinterpret_cast<CUfunction>(handle)) != CUDA_SUCCESS) {
    return cudaErrorUnknown;
  }
  *loaded = state == CU_FUNCTION_LOADING_STATE_LOADED;
  return cudaSuccess;
}

const void* NeverLaunchedKernel() { return reinterpret_cast<const void*>(&NeverLaunched); }

}  // namespace mla_tail_testing

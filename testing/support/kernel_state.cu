#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <utility>

#include "testing/support/kernel_state.h"

namespace mla_tail_testing {
namespace {

__global__ void NeverLaunched(int* out) { *out = 1; }
__global__ void Launched(int* out) {
  if (out != nullptr) *out = 1;
}

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

// The driver functions of the way that loads nothing.
struct Driver {
  PFN_cuKernelGetName_v12030 kernel_get_name = nullptr;
  PFN_cuKernelGetLibrary_v12050 kernel_get_library = nullptr;
  PFN_cuLibraryGetModule_v12000 library_get_module = nullptr;
  PFN_cuModuleGetFunctionCount_v12040 module_get_function_count = nullptr;
  PFN_cuModuleEnumerateFunctions_v12040 module_enumerate_functions = nullptr;
  PFN_cuFuncGetName_v12030 func_get_name = nullptr;
  PFN_cuFuncIsLoaded_v12040 func_is_loaded = nullptr;

  cudaError_t Resolve() {
    for (cudaError_t e :
         {DriverEntry("cuKernelGetName", 12030, &kernel_get_name),
          DriverEntry("cuKernelGetLibrary", 12050, &kernel_get_library),
          DriverEntry("cuLibraryGetModule", 12000, &library_get_module),
          DriverEntry("cuModuleGetFunctionCount", 12040, &module_get_function_count),
          DriverEntry("cuModuleEnumerateFunctions", 12040, &module_enumerate_functions),
          DriverEntry("cuFuncGetName", 12030, &func_get_name),
          DriverEntry("cuFuncIsLoaded", 12040, &func_is_loaded)}) {
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
};

// A driver result as the runtime error of the same number.
cudaError_t Runtime(CUresult r) { return static_cast<cudaError_t>(r); }

}  // namespace

cudaError_t LazyLoading(bool* lazy) {
  PFN_cuModuleGetLoadingMode_v11070 get_mode = nullptr;
  if (const cudaError_t e = DriverEntry("cuModuleGetLoadingMode", 11070, &get_mode);
      e != cudaSuccess) {
    return e;
  }
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  if (const CUresult r = get_mode(&mode); r != CUDA_SUCCESS) return Runtime(r);
  *lazy = mode == CU_MODULE_LAZY_LOADING;
  return cudaSuccess;
}

cudaError_t KernelsOfModule(const void* function, ModuleKernels* module) {
  Driver driver;
  if (const cudaError_t e = driver.Resolve(); e != cudaSuccess) return e;
  cudaKernel_t kernel = nullptr;
  if (const cudaError_t e = cudaGetKernel(&kernel, function); e != cudaSuccess) return e;
  const CUkernel k = reinterpret_cast<CUkernel>(kernel);
  const char* name = nullptr;
  if (const CUresult r = driver.kernel_get_name(&name, k); r != CUDA_SUCCESS) return Runtime(r);
  CUlibrary library = nullptr;
  if (const CUresult r = driver.kernel_get_library(&library, k); r != CUDA_SUCCESS) {
    return Runtime(r);
  }
  CUmodule handle = nullptr;
  if (const CUresult r = driver.library_get_module(&handle, library); r != CUDA_SUCCESS) {
    return Runtime(r);
  }
  unsigned int count = 0;
  if (const CUresult r = driver.module_get_function_count(&count, handle); r != CUDA_SUCCESS) {
    return Runtime(r);
  }
  std::vector<CUfunction> functions(count);
  if (const CUresult r = driver.module_enumerate_functions(functions.data(), count, handle);
      r != CUDA_SUCCESS) {
    return Runtime(r);
  }
  module->module = handle;
  module->function_name = name != nullptr ? name : "";
  module->kernels.clear();
  for (CUfunction f : functions) {
    KernelLoadState state;
    const char* function_name = nullptr;
    if (const CUresult r = driver.func_get_name(&function_name, f); r != CUDA_SUCCESS) {
      return Runtime(r);
    }
    state.name = function_name != nullptr ? function_name : "";
    CUfunctionLoadingState loading = CU_FUNCTION_LOADING_STATE_UNLOADED;
    if (const CUresult r = driver.func_is_loaded(&loading, f); r != CUDA_SUCCESS) {
      return Runtime(r);
    }
    state.loaded = loading == CU_FUNCTION_LOADING_STATE_LOADED;
    module->kernels.push_back(std::move(state));
  }
  return cudaSuccess;
}

cudaError_t KernelIsLoaded(const void* function, bool* loaded) {
  ModuleKernels module;
  if (const cudaError_t e = KernelsOfModule(function, &module); e != cudaSuccess) return e;
  for (const KernelLoadState& kernel : module.kernels) {
    if (kernel.name == module.function_name) {
      *loaded = kernel.loaded;
      return cudaSuccess;
    }
  }
  return cudaErrorSymbolNotFound;
}

const void* NeverLaunchedKernel() { return reinterpret_cast<const void*>(&NeverLaunched); }
const void* LaunchedKernel() { return reinterpret_cast<const void*>(&Launched); }

cudaError_t LaunchControl(cudaStream_t stream) {
  Launched<<<1, 1, 0, stream>>>(nullptr);
  return cudaGetLastError();
}

}  // namespace mla_tail_testing

#ifndef MLA_TAIL_TESTING_SUPPORT_KERNEL_STATE_H_
#define MLA_TAIL_TESTING_SUPPORT_KERNEL_STATE_H_

// Whether CUDA has loaded kernels in the current context, asked without loading any, for the
// test that MlaTail::Create loads the tail's kernels (testing/kernel_load_gpu_test.cc). Under
// lazy loading (CUDA_MODULE_LOADING=LAZY, CUDA's default) a kernel is loaded at its first
// launch, or when something first asks for its CUfunction: the runtime's cudaGetFuncBySymbol,
// cudaFuncGetAttributes and kernel-node calls all get one (a control kernel built into a node and
// asked through cudaGetFuncBySymbol read as loaded). So the kernels are found another way: the
// kernel's context-independent handle (cudaGetKernel), its library's module in the current
// context (cuKernelGetLibrary, cuLibraryGetModule), and that module's functions as
// cuModuleEnumerateFunctions lists them, which CUDA documents as possibly not loaded under lazy
// loading; each is asked with cuFuncIsLoaded. Two controls (below) tell whether this way sees
// loading on a given driver.

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace mla_tail_testing {

// Whether CUDA loads kernels lazily (cuModuleGetLoadingMode): only then does it show whether a
// call loaded one.
cudaError_t LazyLoading(bool* lazy);

// One kernel of a module and whether it is loaded in the current context.
struct KernelLoadState {
  std::string name;  // as the driver names it (mangled)
  bool loaded = false;
};

// The kernels of the module (one .cu file's device code) that holds the kernel `function` (its
// host-side entry, as a kernel node's parameters hold it), in the current context.
struct ModuleKernels {
  const void* module = nullptr;  // the CUmodule: the same for kernels of one module
  std::string function_name;     // `function`'s own name
  std::vector<KernelLoadState> kernels;
};
cudaError_t KernelsOfModule(const void* function, ModuleKernels* module);

// Whether the kernel `function` is loaded in the current context, asked the same way.
cudaError_t KernelIsLoaded(const void* function, bool* loaded);

// The controls, two kernels of this file's module: one nothing launches (it must read "not
// loaded"), and one launched by LaunchControl (it must then read "loaded").
const void* NeverLaunchedKernel();
const void* LaunchedKernel();
cudaError_t LaunchControl(cudaStream_t stream);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_KERNEL_STATE_H_

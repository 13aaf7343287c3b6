#ifndef MLA_TAIL_TESTING_SUPPORT_KERNEL_STATE_H_
#define MLA_TAIL_TESTING_SUPPORT_KERNEL_STATE_H_

// Whether CUDA has loaded a kernel on the current device, for the test that MlaTail::Create loads
// the tail's kernels (testing/kernel_load_gpu_test.cc). CUDA loads kernels lazily by default
// (CUDA_MODULE_LOADING=LAZY): at a kernel's first launch or instantiation, unless something loads
// it before.

#include <cuda_runtime_api.h>

namespace mla_tail_testing {

// Whether CUDA loads kernels lazily (cuModuleGetLoadingMode): only then does it show whether a
// call loaded one.
cudaError_t LazyLoading(bool* lazy);

// Whether the kernel `function` (a kernel's host-side entry, as a kernel node's parameters hold
// it) is loaded in the current device's context: cuFuncIsLoaded, through the driver's entry
// point. Asks without loading it.
cudaError_t KernelIsLoaded(const void* function, bool* loaded);

// A kernel nothing launches: the control of KernelIsLoaded (it must read "not loaded").
const void* NeverLaunchedKernel();

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_KERNEL_STATE_H_

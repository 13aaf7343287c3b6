#ifndef MLA_KERNELS_KERNEL_ATTRIBUTES_H_
#define MLA_KERNELS_KERNEL_ATTRIBUTES_H_

#include <cuda_runtime_api.h>

namespace mla {

// Lets `kernel` use `bytes` of dynamic shared memory on the current device. Through the
// driver's cuFuncSetAttribute: cudaFuncSetAttribute resets the thread's pending runtime error,
// which may be the caller's.
cudaError_t SetMaxDynamicSharedMemory(const void* kernel, int bytes);

}  // namespace mla

#endif  // MLA_KERNELS_KERNEL_ATTRIBUTES_H_

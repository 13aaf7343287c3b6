#ifndef MLA_TAIL_MLA_KERNELS_KERNEL_ATTRIBUTES_H_
#define MLA_TAIL_MLA_KERNELS_KERNEL_ATTRIBUTES_H_

#include <cuda_runtime_api.h>

namespace mla_tail {

// Lets `kernel` use `bytes` of dynamic shared memory on the current device. Through the
// driver's cuFuncSetAttribute: cudaFuncSetAttribute resets the thread's pending runtime error,
// which may be the caller's.
cudaError_t SetMaxDynamicSharedMemory(const void* kernel, int bytes);

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_KERNELS_KERNEL_ATTRIBUTES_H_

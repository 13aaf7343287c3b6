#ifndef MLA_TAIL_MLA_KERNELS_SM90_H_
#define MLA_TAIL_MLA_KERNELS_SM90_H_

// The shared memory limits of a compute capability 9.0 GPU (H100, H200), as CUDA documents them,
// against which the kernels' tiles are sized.

#include <cstddef>

namespace mla_tail::internal {

// Shared memory of one multiprocessor, for all the blocks resident there.
inline constexpr size_t kSharedMemoryPerMultiprocessor = 228 * 1024;
// What CUDA reserves of it for each resident block.
inline constexpr size_t kSharedMemoryReservedPerBlock = 1024;
// The most one block may use (dynamic shared memory past kSharedMemoryWithoutOptIn needs
// cudaFuncAttributeMaxDynamicSharedMemorySize: LoadKernel sets it).
inline constexpr size_t kSharedMemoryPerBlock = 227 * 1024;
inline constexpr size_t kSharedMemoryWithoutOptIn = 48 * 1024;

// How many blocks of `smem_bytes` each fit a multiprocessor's shared memory.
constexpr size_t BlocksPerMultiprocessor(size_t smem_bytes) {
  return kSharedMemoryPerMultiprocessor / (smem_bytes + kSharedMemoryReservedPerBlock);
}

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_KERNELS_SM90_H_

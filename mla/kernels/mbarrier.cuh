#ifndef MLA_TAIL_MLA_KERNELS_MBARRIER_CUH_
#define MLA_TAIL_MLA_KERNELS_MBARRIER_CUH_

// Shared-memory mbarriers of one block, for kernels whose warps hand buffers to each other
// without block-wide barriers. A barrier counts arrivals per phase; waiters name the phase they
// wait for by its parity, so a waiter must never be more than one phase ahead of the barrier.

#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"

namespace mla_tail::internal::device {

// One thread initializes; a block barrier publishes it before any use.
__device__ __forceinline__ void MbarrierInit(uint64_t* barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddress(barrier)), "r"(arrivals)
               : "memory");
}

// Release: this thread's earlier memory accesses happen before the phase completes.
__device__ __forceinline__ void MbarrierArrive(uint64_t* barrier) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}" ::"r"(
                   SmemAddress(barrier))
               : "memory");
}

// An arrival once every cp.async this thread issued so far has landed; the barrier's count
// includes it (.noinc).
__device__ __forceinline__ void MbarrierArriveOnCopies(uint64_t* barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(SmemAddress(barrier))
               : "memory");
}

// Acquire: returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void MbarrierWait(uint64_t* barrier, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}" ::"r"(SmemAddress(barrier)),
      "r"(parity)
      : "memory");
}

// A barrier among the `threads` threads (whole warps) that name `id` (1-15; 0 is __syncthreads).
__device__ __forceinline__ void NamedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_MBARRIER_CUH_

#ifndef MLA_TAIL_MLA_KERNELS_MBARRIER_CUH_
#define MLA_TAIL_MLA_KERNELS_MBARRIER_CUH_

// Shared-memory mbarriers, for kernels whose warps hand buffers to each other without block-wide
// barriers, and for stores from the other blocks of a cluster. A barrier counts arrivals per phase;
// waiters name the phase they wait for by its parity, so a waiter must never be more than one phase
// ahead of the barrier.

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

// What a wait acquires: this block's arrivals and copies (kBlock), or also the stores that other
// blocks of the cluster counted on the barrier (kCluster).
enum class MbarrierScope { kBlock, kCluster };

// Acquire: returns once the phase of parity `parity` has completed.
template <MbarrierScope kScope = MbarrierScope::kBlock>
__device__ __forceinline__ void MbarrierWait(uint64_t* barrier, uint32_t parity) {
#define MLA_TAIL_MBARRIER_WAIT(SEMANTICS)                   \
  asm volatile(                                             \
      "{\n.reg .pred done;\n"                               \
      "WAIT_%=:\n"                                          \
      "mbarrier.try_wait.parity" SEMANTICS                  \
      ".shared::cta.b64 done, [%0], %1;\n"                  \
      "@!done bra WAIT_%=;\n}" ::"r"(SmemAddress(barrier)), \
      "r"(parity)                                           \
      : "memory")
  if constexpr (kScope == MbarrierScope::kCluster) {
    MLA_TAIL_MBARRIER_WAIT(".acquire.cluster");
  } else {
    MLA_TAIL_MBARRIER_WAIT("");
  }
#undef MLA_TAIL_MBARRIER_WAIT
}

// Barriers that other blocks of the cluster signal (transaction counts in bytes).

// After MbarrierInit, before a cluster barrier's arrival: the initialization happens before any
// use by another block of the cluster that waits at that barrier first.
__device__ __forceinline__ void FenceMbarrierInitForCluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// An arrival that also expects `bytes` more of the phase's asynchronous stores.
__device__ __forceinline__ void MbarrierArriveExpectBytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddress(barrier)),
               "r"(bytes)
               : "memory");
}

// st.async: stores `value` at the place `slot` names in block `rank` of the cluster and counts its
// 4 bytes on that block's barrier at the place `barrier` names (both in this block's shared
// memory).
__device__ __forceinline__ void StoreAsyncToRank(const uint32_t* slot, uint32_t value,
                                                 const uint64_t* barrier, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 remote_slot, remote_barrier;\n"
      "mapa.shared::cluster.u32 remote_slot, %0, %2;\n"
      "mapa.shared::cluster.u32 remote_barrier, %1, %2;\n"
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [remote_slot], %3, "
      "[remote_barrier];\n}" ::"r"(SmemAddress(slot)),
      "r"(SmemAddress(barrier)), "r"(rank), "r"(value)
      : "memory");
}

// A barrier among the `threads` threads (whole warps) that name `id` (1-15; 0 is __syncthreads).
__device__ __forceinline__ void NamedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_MBARRIER_CUH_

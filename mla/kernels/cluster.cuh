#ifndef MLA_KERNELS_CLUSTER_CUH_
#define MLA_KERNELS_CLUSTER_CUH_

// Thread-block clusters: blocks that push parts of their shared memory into each other's with
// bulk copies, each copy completing bytes on an mbarrier of the receiving block. A receiver
// initializes its barriers and expects the bytes before the cluster barrier; senders push only
// after it.

#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"

namespace mla {
namespace device {

// Makes this thread's mbarrier.init visible to the cluster (to other blocks' bulk copies).
__device__ __forceinline__ void FenceMbarrierInitCluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival on a barrier of this block, and `bytes` more to be completed on its phase.
__device__ __forceinline__ void MbarrierArriveExpectBytes(uint64_t* barrier, uint32_t bytes) {
  asm volatile(
      "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}" ::"r"(
          SmemAddress(barrier)),
      "r"(bytes)
      : "memory");
}

// The cluster barrier in two halves; all threads of every block call both. Release/acquire:
// what a block did before its arrival (its barriers' initialization) is visible after the wait.
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The address in block `rank`'s shared memory of what is at `smem_address` in this block's.
__device__ __forceinline__ uint32_t MapShared(uint32_t smem_address, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_address), "r"(rank));
  return remote;
}

// Copies `bytes` (a multiple of 16, both ends 16-byte aligned) of this block's shared memory to
// block `rank`'s, at the same offset, completing them on that block's `barrier` (given by its
// address in this block: the barriers of every block sit at the same offset). The source is read
// through the async proxy: the writes to it must be fenced (fence.proxy.async) and published.
__device__ __forceinline__ void PushSharedToBlock(uint32_t smem_address, uint32_t bytes,
                                                  const uint64_t* barrier, int rank) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];" ::"r"(MapShared(smem_address, rank)),
      "r"(smem_address), "r"(bytes), "r"(MapShared(SmemAddress(barrier), rank))
      : "memory");
}

// Waits until the bulk copies this thread issued have read their sources (before the block
// exits and its shared memory goes).
__device__ __forceinline__ void PushesCommitAndWaitRead() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;" ::: "memory");
}

}  // namespace device
}  // namespace mla

#endif  // MLA_KERNELS_CLUSTER_CUH_

// ingest_probe: how fast one multiprocessor pulls bytes from memory into its shared memory, by
// copy mechanism, shared-memory size (which sets the L1/shared carveout), copies in flight and
// grid size. Why: the fused kernels that hold W_UV in shared memory (225 KB a block) moved about
// 16 GB/s a multiprocessor, well under the 30 GB/s a multiprocessor that 4 TB/s needs.
//
// Each block streams `kib_per_block` KiB of its own contiguous region through a ring of `depth`
// chunks of `chunk` bytes in shared memory:
//   cp_async: all 256 threads issue 16-byte cp.async.cg copies, a commit group a chunk, waiting
//             until at most depth - 1 groups are in flight;
//   bulk:     thread 0 issues one cp.async.bulk a chunk (the copy engine, as TMA), completing an
//             mbarrier a ring slot.
// Cold: every launch reads bytes the launches before it did not (a 528 MiB buffer walked in
// order; L2 is 60 MB); warm: the same 128 KiB a block each launch (L2 hits after the first).
// Output: CSV on stdout, GB/s a block and TB/s in all.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "bench/cuda_check.h"
#include "bench/ingest_probe.h"

namespace mla_tail_bench {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void CopyAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

template <int kDepth>
__global__ void __launch_bounds__(kThreads)
    CpAsyncIngest(const char* src, int64_t region_bytes, int chunk_bytes, int chunks, int* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const char* region = src + blockIdx.x * region_bytes;
  for (int c = 0; c < chunks; ++c) {
    const uint32_t slot = base + (c % kDepth) * chunk_bytes;
    for (int i = threadIdx.x; i < chunk_bytes / 16; i += kThreads) {
      CopyAsync16(slot + 16 * i, region + int64_t{c} * chunk_bytes + 16 * i);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group %0;" ::"n"(kDepth - 1) : "memory");
    __syncthreads();
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0 && smem[0] == 0xFF && smem[chunk_bytes - 1] == 0xFF) atomicAdd(sink, 1);
}

__device__ __forceinline__ void BarrierWait(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

__global__ void __launch_bounds__(kThreads)
    BulkIngest(const char* src, int64_t region_bytes, int chunk_bytes, int chunks, int depth,
               int* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t barriers[16];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t bar0 = static_cast<uint32_t>(__cvta_generic_to_shared(barriers));
  const char* region = src + blockIdx.x * region_bytes;
  if (threadIdx.x == 0) {
    for (int s = 0; s < depth; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * s) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int c = 0; c < chunks; ++c) {
      const int s = c % depth;
      const uint32_t bar = bar0 + 8 * s;
      if (c >= depth) BarrierWait(bar, ((c / depth) - 1) & 1);
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                   "r"(chunk_bytes)
                   : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
          "[%3];" ::"r"(base + s * chunk_bytes),
          "l"(region + int64_t{c} * chunk_bytes), "r"(chunk_bytes), "r"(bar)
          : "memory");
    }
    for (int c = chunks > depth ? chunks - depth : 0; c < chunks; ++c) {
      BarrierWait(bar0 + 8 * (c % depth), (c / depth) & 1);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && smem[0] == 0xFF && smem[chunk_bytes - 1] == 0xFF) atomicAdd(sink, 1);
}

const void* CpAsyncKernel(int depth) {
  switch (depth) {
    case 2:
      return reinterpret_cast<const void*>(CpAsyncIngest<2>);
    case 4:
      return reinterpret_cast<const void*>(CpAsyncIngest<4>);
    case 8:
      return reinterpret_cast<const void*>(CpAsyncIngest<8>);
    default:
      return nullptr;
  }
}

}  // namespace

int RunIngestProbe() {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  constexpr int64_t kRegionBytes = int64_t{1} << 20;  // 1 MiB a block and launch
  constexpr int kRotations = 4;
  const int64_t launch_bytes = kRegionBytes * sms;
  char* src = nullptr;
  int* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&src, launch_bytes * kRotations));
  CUDA_CHECK(cudaMemset(src, 1, launch_bytes * kRotations));
  CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
  for (int depth : {2, 4, 8}) {
    CUDA_CHECK(cudaFuncSetAttribute(CpAsyncKernel(depth),
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, 224 * 1024));
  }
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(BulkIngest),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, 224 * 1024));
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::printf(
      "method,smem_kib,blocks,chunk_bytes,depth,cold,us_per_launch,gb_s_per_block,"
      "tb_s_total\n");
  for (const char* method : {"cp_async", "bulk"}) {
    for (int smem_kib : {64, 128, 224}) {
      for (int blocks : {8, sms}) {
        for (int chunk : {8192, 16384}) {
          for (int depth : {2, 4, 8}) {
            if (chunk * depth > smem_kib * 1024) continue;
            for (bool cold : {true, false}) {
              // Warm: 128 KiB a block, the same bytes every launch.
              const int chunks = (cold ? kRegionBytes : 128 * 1024) / chunk;
              int64_t region = int64_t{chunks} * chunk;  // a block's bytes, back to back
              const int64_t bytes = region * blocks;
              const bool bulk = method[0] == 'b';
              auto launch = [&](int i) {
                // Cold: each launch moves on by its own bytes, wrapping before the buffer ends.
                const char* s =
                    src + (cold ? (int64_t{i} * bytes) % (kRotations * launch_bytes - bytes) : 0);
                if (bulk) {
                  BulkIngest<<<blocks, kThreads, smem_kib * 1024>>>(s, region, chunk, chunks, depth,
                                                                    sink);
                } else {
                  int chunks_arg = chunks;
                  void* args[] = {&s, &region, &chunk, &chunks_arg, &sink};
                  cudaLaunchKernel(CpAsyncKernel(depth), blocks, kThreads, args, smem_kib * 1024,
                                   nullptr);
                }
              };
              for (int i = 0; i < 4; ++i) launch(i);
              constexpr int kLaunches = 20;
              CUDA_CHECK(cudaEventRecord(start));
              for (int i = 4; i < 4 + kLaunches; ++i) launch(i);
              CUDA_CHECK(cudaEventRecord(stop));
              CUDA_CHECK(cudaEventSynchronize(stop));
              CUDA_CHECK(cudaGetLastError());
              float ms = 0;
              CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
              const double us = 1000.0 * ms / kLaunches;
              std::printf("%s,%d,%d,%d,%d,%d,%.2f,%.1f,%.3f\n", method, smem_kib, blocks, chunk,
                          depth, cold ? 1 : 0, us, bytes / blocks / (us * 1e3), bytes / (us * 1e6));
            }
          }
        }
      }
    }
  }
  return 0;
}

}  // namespace mla_tail_bench

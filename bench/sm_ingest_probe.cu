// sm_ingest_probe: how fast a multiprocessor pulls bytes into its shared memory when all of them
// are in flight at once, as the fused tile kernels' blocks do, from L2 (bytes read by the launch
// before) and from DRAM (L2 cold), with 1-132 multiprocessors pulling at once.
//
// Each of `sms` blocks (one a multiprocessor: 200 KB of shared memory) issues 16-byte cp.async
// copies of its own `kib` KiB, 256 threads, all before waiting for any, then waits for all. The
// launches run back to back in one CUDA graph with PDL (griddepcontrol.wait first), as the tails
// do. Warm: every launch reads the same bytes (L2 hits after the first launch: at most 132 x 192
// KiB = 25 MB); cold: each launch reads bytes the launches before it did not (a 768 MiB buffer
// walked in order). The time a launch at 192 KiB less the time at 16 KiB is the time of 176 KiB
// more a multiprocessor: their ratio is the rate a multiprocessor ingests at, without the launch,
// dependency and latency terms. Prints CSV.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/median.h"
#include "bench/sm_ingest_probe.h"

namespace mla_tail_bench {
namespace {

constexpr int kThreads = 256;
constexpr int kSmemBytes = 200 * 1024;
constexpr int64_t kColdBytes = int64_t{768} << 20;
// Read before each cold replay, so that no byte the replay reads is still in L2 (a replay's own
// reads, up to 32 launches' of a few MiB, fit in L2 many times over), and L2 holds clean lines
// (a write would leave dirty ones to be written back during the timed replay).
constexpr int64_t kFlushBytes = int64_t{256} << 20;

__global__ void ReadAllKernel(const uint4* words, int64_t count, int* sink) {
  uint32_t x = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint4 w = words[i];
    x ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (x == 0x9e3779b9u) atomicAdd(sink, 1);  // never in practice: keeps the loads
}
constexpr int kLaunches = 32;

struct IngestArgs {
  const char* src;
  int64_t block_bytes;
  int* sink;
};

__global__ void __launch_bounds__(kThreads, 1) IngestKernel(const IngestArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const char* region = a.src + blockIdx.x * a.block_bytes;
  for (int64_t off = threadIdx.x * 16; off < a.block_bytes; off += kThreads * 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                     base + static_cast<uint32_t>(off % kSmemBytes)),
                 "l"(region + off)
                 : "memory");
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0 && smem[0] == 0xFF && smem[a.block_bytes % kSmemBytes / 2] == 0xFF) {
    atomicAdd(a.sink, 1);
  }
}

// Microseconds a launch: the median of 15 replays of a graph of kLaunches launches. Cold: the
// launches read distinct regions, and `flush` is read before each replay (untimed).
double TimeLaunches(const char* buffer, char* flush, int sms, int64_t block_bytes, bool cold,
                    int* sink, cudaStream_t stream) {
  const int64_t launch_bytes = block_bytes * sms;
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunches; ++i) {
    const int64_t offset = cold ? (i * launch_bytes) % (kColdBytes - launch_bytes) : 0;
    cudaLaunchAttribute attributes[1];
    attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(sms);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSmemBytes;
    config.stream = stream;
    config.attrs = attributes;
    config.numAttrs = 1;
    CUDA_CHECK(
        cudaLaunchKernelEx(&config, IngestKernel, IngestArgs{buffer + offset, block_bytes, sink}));
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 18; ++r) {
    if (cold) {
      ReadAllKernel<<<528, 512, 0, stream>>>(reinterpret_cast<const uint4*>(flush),
                                             kFlushBytes / 16, sink);
      CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaEventRecord(e0, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float t;
    CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 3) ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return 1000.0 * Median(ms) / kLaunches;
}

}  // namespace

int RunSmIngestProbe() {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(IngestKernel),
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  char* buffer = nullptr;
  char* flush = nullptr;
  int* sink = nullptr;
  CUDA_CHECK(cudaMalloc(&buffer, kColdBytes));
  CUDA_CHECK(cudaMalloc(&flush, kFlushBytes));
  CUDA_CHECK(cudaMemset(flush, 2, kFlushBytes));
  CUDA_CHECK(cudaMemset(buffer, 1, kColdBytes));
  CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("source,sms,kib_per_sm,us_per_launch,marginal_gb_s_per_sm,marginal_tb_s\n");
  for (const bool cold : {false, true}) {
    for (const int n : {1, 8, 32, 66, sms}) {
      double small_us = 0;
      for (const int kib : {16, 64, 128, 192}) {
        const double us = TimeLaunches(buffer, flush, n, int64_t{kib} << 10, cold, sink, stream);
        if (kib == 16) small_us = us;
        const double extra = (int64_t{kib - 16} << 10) / ((us - small_us) * 1e-6);
        std::printf("%s,%d,%d,%.3f,%.1f,%.3f\n", cold ? "dram" : "l2", n, kib, us,
                    kib == 16 ? 0.0 : extra / 1e9, kib == 16 ? 0.0 : extra * n / 1e12);
        std::fflush(stdout);
      }
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(buffer));
  CUDA_CHECK(cudaFree(flush));
  CUDA_CHECK(cudaFree(sink));
  return 0;
}

}  // namespace mla_tail_bench

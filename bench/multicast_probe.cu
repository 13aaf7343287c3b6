// Does sharing W_UV's reads across a cluster (TMA multicast) shorten the mid-size tiles' ingest?
//
// Each block stands for one 64-row x 128-column tile of the tail (a head's 64 latent rows, 64 KB,
// and the head's whole W_UV, 128 KB), brings both into shared memory with every copy in flight at
// once, and exits: the ingest of Tile's 64 x 128 tiles without their MMAs and epilogue.
// Layers rotate so that L2 is cold, as in tail_bench. Ways of bringing W_UV in:
//   cp.async   128 threads, 16 bytes a copy (what the kernels do), all of it or 1 / f of it (an
//              upper bound on what sharing could save: fewer bytes, no handoff);
//   bulk       one cp.async.bulk of the head's 128 KB;
//   mcast c    a cluster of c row tiles of one head; block k bulk-copies rows [k, k + 1) * 128 / c
//              of W_UV and multicasts them into every block of the cluster.
// The latent always by cp.async (it is not shared). Prints CSV: µs a grid, 240 grids rotating
// through 24 layers in one CUDA graph, beside an empty kernel's graph. What it found on the
// H200: docs/design.md.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/multicast_probe.h"

namespace mla_tail_bench {
namespace {

constexpr int kLatentDim = 512;
constexpr int kValueDim = 128;
constexpr int kRows = 64;
constexpr int kThreads = 128;
constexpr int kLatentBytes = kRows * kLatentDim * 2;       // 64 KB
constexpr int kWBytes = kValueDim * kLatentDim * 2;        // 128 KB
constexpr int kSmemBytes = kLatentBytes + kWBytes + 1024;  // + barrier, alignment
constexpr int kLayers = 24;

__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void CopyAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
__device__ __forceinline__ void Wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nW_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra W_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}

enum Mode : int { kCpAsync = 0, kBulk = 1, kMcast = 2, kEmpty = 3 };

struct Args {
  const char* latent;  // [layers][rows][heads][512] bf16
  const char* w;       // [layers][heads][128][512] bf16
  int heads, rows, layer;
  int w_fraction;  // cp.async: 1 / w_fraction of W_UV
  int* sink;
};

// grid: (row tiles, heads); cluster (c, 1, 1) along the row tiles for kMcast.
template <int kMode>
__global__ void __launch_bounds__(kThreads, 1) Ingest(const Args a) {
  if constexpr (kMode == kEmpty) return;
  extern __shared__ __align__(1024) char smem[];
  const int head = blockIdx.y, tile = blockIdx.x;
  const size_t latent_layer = static_cast<size_t>(a.rows) * a.heads * kLatentDim * 2;
  const size_t w_layer = static_cast<size_t>(a.heads) * kWBytes;
  const char* latent = a.latent + a.layer * latent_layer;
  const char* w = a.w + a.layer * w_layer + static_cast<size_t>(head) * kWBytes;
  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kLatentBytes + kWBytes);
  const uint32_t bar_addr = Smem(bar);
  const uint32_t w_dst = Smem(smem + kLatentBytes);

  if constexpr (kMode != kCpAsync) {
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if constexpr (kMode == kMcast) {
      ClusterSync();  // every block's barrier is initialized before anyone multicasts into it
    } else {
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr),
                   "r"(kWBytes)
                   : "memory");
      if constexpr (kMode == kBulk) {
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
            "[%3];" ::"r"(w_dst),
            "l"(w), "r"(kWBytes), "r"(bar_addr)
            : "memory");
      } else {
        uint32_t nctas;
        asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(nctas));
        const uint32_t rank = ClusterRank();
        const uint32_t piece = kWBytes / nctas;
        const uint16_t mask = static_cast<uint16_t>((1u << nctas) - 1);
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
            " [%0], [%1], %2, [%3], %4;" ::"r"(w_dst + rank * piece),
            "l"(w + rank * piece), "r"(piece), "r"(bar_addr), "h"(mask)
            : "memory");
      }
    }
  } else {
    const int w_bytes = kWBytes / a.w_fraction;
    for (int off = threadIdx.x * 16; off < w_bytes; off += kThreads * 16) {
      CopyAsync16(w_dst + off, w + off);
    }
  }
  // The latent: 64 rows of 1 KB, row t at latent + (t * heads + head) * 1 KB.
  for (int off = threadIdx.x * 16; off < kLatentBytes; off += kThreads * 16) {
    const int r = off / 1024;
    const int t = tile * kRows + r;
    if (t < a.rows) {
      CopyAsync16(Smem(smem) + off,
                  latent + (static_cast<size_t>(t) * a.heads + head) * 1024 + off % 1024);
    }
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
  if constexpr (kMode != kCpAsync) Wait(bar_addr, 0);
  __syncthreads();
  if (threadIdx.x == 0 && smem[kLatentBytes + 7] == 123 && smem[5] == 45) *a.sink = 1;
  if constexpr (kMode == kMcast) ClusterSync();  // no block leaves while peers write into it
}

template <int kMode>
void Launch(const Args& a, int cluster, cudaStream_t s) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3((a.rows + kRows - 1) / kRows, a.heads);
  c.blockDim = dim3(kThreads);
  c.dynamicSmemBytes = kSmemBytes;
  c.stream = s;
  c.attrs = attr;
  c.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&c, Ingest<kMode>, a));
}

template <int kMode>
double Time(Args a, int cluster, int reps) {
  CUDA_CHECK(
      cudaFuncSetAttribute(Ingest<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  if (cluster > 1) {
    CUDA_CHECK(
        cudaFuncSetAttribute(Ingest<kMode>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < reps; ++i) {
    a.layer = i % kLayers;
    Launch<kMode>(a, cluster, s);
  }
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e;
  CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  cudaEvent_t b0, b1;
  CUDA_CHECK(cudaEventCreate(&b0));
  CUDA_CHECK(cudaEventCreate(&b1));
  double best = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    CUDA_CHECK(cudaEventRecord(b0, s));
    CUDA_CHECK(cudaGraphLaunch(e, s));
    CUDA_CHECK(cudaEventRecord(b1, s));
    CUDA_CHECK(cudaEventSynchronize(b1));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, b0, b1));
    if (trial > 0 && ms * 1000.0 / reps < best) best = ms * 1000.0 / reps;
  }
  CUDA_CHECK(cudaGraphExecDestroy(e));
  CUDA_CHECK(cudaGraphDestroy(g));
  CUDA_CHECK(cudaStreamDestroy(s));
  return best;
}

}  // namespace

int RunMulticastProbe() {
  const int shapes[][2] = {{8, 1024}, {16, 512}, {32, 256}, {64, 128}, {12, 512}, {16, 1024}};
  const int reps = 240;
  std::printf("heads,rows,tiles,mode,cluster,w_fraction,us,mb_l2_to_sm,tb_s\n");
  for (const auto& sh : shapes) {
    Args a{};
    a.heads = sh[0];
    a.rows = sh[1];
    const size_t latent_layer = static_cast<size_t>(a.rows) * a.heads * kLatentDim * 2;
    const size_t w_layer = static_cast<size_t>(a.heads) * kWBytes;
    char *latent, *w;
    CUDA_CHECK(cudaMalloc(&latent, latent_layer * kLayers));
    CUDA_CHECK(cudaMalloc(&w, w_layer * kLayers));
    CUDA_CHECK(cudaMemset(latent, 1, latent_layer * kLayers));
    CUDA_CHECK(cudaMemset(w, 2, w_layer * kLayers));
    CUDA_CHECK(cudaMalloc(&a.sink, sizeof(int)));
    a.latent = latent;
    a.w = w;
    a.w_fraction = 1;
    const int tiles = (a.rows + kRows - 1) / kRows * a.heads;
    auto row = [&](const char* mode, int cluster, int f, double us) {
      const double mb = (tiles * (static_cast<double>(kLatentBytes) +
                                  (f ? kWBytes / static_cast<double>(f) : 0))) /
                        1e6;
      std::printf("%d,%d,%d,%s,%d,%d,%.3f,%.1f,%.2f\n", a.heads, a.rows, tiles, mode, cluster, f,
                  us, mb, mb / us);
    };
    row("empty", 1, 0, Time<kEmpty>(a, 1, reps));
    for (int f : {1, 2, 4, 16}) {
      a.w_fraction = f;
      row("cp_async", 1, f, Time<kCpAsync>(a, 1, reps));
    }
    a.w_fraction = 1;
    row("bulk", 1, 1, Time<kBulk>(a, 1, reps));
    const int row_tiles = (a.rows + kRows - 1) / kRows;
    for (int c : {2, 4, 8}) {
      if (row_tiles % c != 0) continue;
      row("mcast", c, c, Time<kMcast>(a, c, reps));
    }
    CUDA_CHECK(cudaFree(latent));
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(a.sink));
  }
  return 0;
}

}  // namespace mla_tail_bench

// Where a fused block's time goes (bench/timeline_probe.h). This file includes the kernels' own
// source, mla/kernels/column_split.cu, latent_split.cu and tile.cu, with the timeline
// stamps defined: thread 0 of each block records its clock at each point of its chain, and the
// global timer at entry, at the dependency wait's return and at the last point. The points:
//   0  entry
//   1  the dependency wait returned (W_UV's first steps and the L2 prefetch issued before it)
//   2  ColumnSplit, LatentSplit: the latent in registers or shared memory; Tile: K
//      step 0's copies landed and published. 3-9: Tile's K steps 1-7 likewise
//   10 the last MMAs done (LatentSplit: every warp's partial sums in shared memory)
//   11 the epilogue done (gate applied; Tile: the tile in shared memory)
//   12 the stores issued
// Built with PROBE_NO_STAMPS the kernels are the library's code and only the replay time counts.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace probe {
constexpr int kPoints = 13;
constexpr int kMaxBlocks = 1024;
constexpr int kSlots = 16;              // launch i of a block index stamps slot i % kSlots
__device__ int g_launches[kMaxBlocks];  // how many times each block index has started
__device__ unsigned g_sink;             // written never: makes a stamp wait for its value
__device__ long long g_clock[kSlots][kMaxBlocks][kPoints];
__device__ long long g_time[kSlots][kMaxBlocks][3];  // global timer at points 0, 1, 12

__device__ __forceinline__ void Stamp(int point) {
  __shared__ int slot;
  if (threadIdx.x != 0) return;
  const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  if (block >= kMaxBlocks) return;
  if (point == 0) slot = atomicAdd(&g_launches[block], 1) % kSlots;
  g_clock[slot][block][point] = clock64();
  const int timed = point == 0 ? 0 : point == 1 ? 1 : point == kPoints - 1 ? 2 : -1;
  if (timed >= 0) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    g_time[slot][block][timed] = t;
  }
}

// A stamp taken once `value` is available: the branch on it holds the clock read back.
__device__ __forceinline__ void StampAfter(int point, unsigned value) {
  if (threadIdx.x == 0 && value == 0x7fc00001u) g_sink = value;
  Stamp(point);
}
}  // namespace probe

#ifdef PROBE_NO_STAMPS
#define MLA_TIMELINE_STAMP(point)
#define MLA_TIMELINE_STAMP_AFTER(point, value)
constexpr bool kStamped = false;
#else
#define MLA_TIMELINE_STAMP(point) ::probe::Stamp(point)
#define MLA_TIMELINE_STAMP_AFTER(point, value) ::probe::StampAfter(point, value)
#define MLA_VALUE_DIRECT_MAX_REGISTERS 168
constexpr bool kStamped = true;
#endif
#include "bench/cuda_check.h"
#include "bench/timeline_probe.h"
#include "mla/kernels/column_split.cu"
#include "mla/kernels/latent_split.cu"
#include "mla/kernels/tile.cu"

namespace mla_tail_bench {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

struct Layer {
  mla_tail::bf16 *latent, *w, *gate, *out;
  int32_t* lengths;
};

// The shapes of tensor-parallel deployments (8-16 heads a GPU), 1-1024 rows, q = 1.
constexpr int kHeads[] = {8, 12, 16};
constexpr int kRows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

}  // namespace

int RunTimelineProbe() {
  using probe::kMaxBlocks;
  using probe::kPoints;
  using probe::kSlots;
  int device = 0, multiprocessors = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(mla_tail::internal::LoadColumnSplit());
  CUDA_CHECK(mla_tail::internal::LoadLatentSplit());
  CUDA_CHECK(mla_tail::internal::LoadTileKernels());
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  // Phases, medians over the middle layers' blocks (p90 for the chain): release = the wait's
  // return after the previous layer's last store; data = wait to the first latent landed;
  // steps = the later K steps; mma = the last step to the last MMAs; epilogue; stores;
  // chain = the wait's return to the stores issued.
  std::printf("heads,rows,kernel,blocks,layers,us_per_layer");
  if (kStamped) {
    std::printf(
        ",period_us,entry_before_prev_end_us,release_us,data_us,steps_us,mma_us,epilogue_us,"
        "stores_us,chain_p50_us,chain_p90_us");
  }
  std::printf("\n");
  std::fflush(stdout);
  static long long clocks[kSlots][kMaxBlocks][kPoints];
  static long long times[kSlots][kMaxBlocks][3];
  for (const int heads : kHeads) {
    for (const int rows : kRows) {
      const mla_tail::FusedKernel kernel =
          mla_tail::DispatchFusedKernel(heads, rows, multiprocessors);
      mla_tail::internal::KernelLaunch launch;
      if (kernel == mla_tail::FusedKernel::kColumnSplit) {
        launch = mla_tail::internal::PlanColumnSplit(heads, rows, multiprocessors);
      } else if (kernel == mla_tail::FusedKernel::kLatentSplit) {
        launch = mla_tail::internal::PlanLatentSplit(heads, rows);
      } else if (mla_tail::internal::PlanTile(heads, rows, kernel, &launch) != cudaSuccess) {
        continue;  // the persistent kernel has no stamps
      }
      const int blocks = static_cast<int>(launch.grid.x * launch.grid.y * launch.grid.z);
      if (blocks > kMaxBlocks) continue;
      const size_t latent_n = size_t{1} * rows * heads * 512;
      const size_t w_n = size_t{1} * heads * 128 * 512;
      const size_t out_n = size_t{1} * rows * heads * 128;
      const size_t bytes = 2 * (latent_n + w_n + 2 * out_n) + 4 * size_t(rows);
      // L2 cold: layers' bytes over 180 MB, a multiple of the stamp slots.
      const int layers = static_cast<int>(
          std::max<size_t>(2, ((size_t{180} << 20) / bytes + kSlots) / kSlots) * kSlots);
      std::vector<Layer> all(layers);
      for (Layer& l : all) {
        CUDA_CHECK(cudaMalloc(&l.latent, latent_n * 2));
        CUDA_CHECK(cudaMalloc(&l.w, w_n * 2));
        CUDA_CHECK(cudaMalloc(&l.gate, out_n * 2));
        CUDA_CHECK(cudaMalloc(&l.out, out_n * 2));
        CUDA_CHECK(cudaMalloc(&l.lengths, rows * 4));
        CUDA_CHECK(cudaMemset(l.latent, 0x3c, latent_n * 2));
        CUDA_CHECK(cudaMemset(l.w, 0x3c, w_n * 2));
        CUDA_CHECK(cudaMemset(l.gate, 0x3c, out_n * 2));
        CUDA_CHECK(cudaMemset(l.lengths, 1, rows * 4));
      }
      // All layers' tails back to back in one graph, with PDL, as tail_bench's embedded graph.
      cudaGraph_t graph;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (const Layer& l : all) {
        const mla_tail::internal::FusedTailParams params{
            l.latent,  heads * 512, l.w,         128 * 512, 512,  l.gate, heads * 128,
            l.lengths, l.out,       heads * 128, heads,     rows, 1};
        CUDA_CHECK(mla_tail::internal::LaunchWithPdl(
            reinterpret_cast<void (*)(mla_tail::internal::FusedTailParams)>(
                const_cast<void*>(launch.function)),
            launch.grid, launch.block, launch.smem_bytes, stream, true, params));
      }
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      cudaGraphExec_t exec;
      CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      for (int i = 0; i < 3; ++i) CUDA_CHECK(cudaGraphLaunch(exec, stream));
      // The median of 15 replays' time a layer, then one replay whose stamps are read.
      std::vector<double> replay_us;
      for (int i = 0; i < 15; ++i) {
        CUDA_CHECK(cudaEventRecord(e0, stream));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaEventRecord(e1, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        replay_us.push_back(ms * 1000.0 / layers);
      }
      std::printf("%d,%d,%s,%d,%d,%.3f", heads, rows, mla_tail::FusedKernelName(kernel), blocks,
                  layers, Quantile(replay_us, 0.5));
      if constexpr (kStamped) {
        static int zeros[kMaxBlocks];
        CUDA_CHECK(cudaMemcpyToSymbol(probe::g_launches, zeros, sizeof(zeros)));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaMemcpyFromSymbol(clocks, probe::g_clock, sizeof(clocks)));
        CUDA_CHECK(cudaMemcpyFromSymbol(times, probe::g_time, sizeof(times)));
        // Slot s holds the last launch of that slot's layers; consecutive slots are consecutive
        // layers. Per slot: first entry, last stores issued.
        std::vector<long long> first(kSlots), last(kSlots);
        for (int s = 0; s < kSlots; ++s) {
          first[s] = times[s][0][0];
          last[s] = times[s][0][2];
          for (int b = 0; b < blocks; ++b) {
            first[s] = std::min(first[s], times[s][b][0]);
            last[s] = std::max(last[s], times[s][b][2]);
          }
        }
        const bool wgmma = kernel != mla_tail::FusedKernel::kColumnSplit &&
                           kernel != mla_tail::FusedKernel::kLatentSplit;
        const int last_step = wgmma ? 9 : 2;
        std::vector<double> period, ahead, release, data, steps, mma, epilogue, stores, chain;
        for (int s = 4; s < kSlots - 2; ++s) {
          period.push_back((first[s + 1] - first[s]) / 1000.0);
          ahead.push_back((last[s - 1] - first[s]) / 1000.0);
          for (int b = 0; b < blocks; ++b) {
            const long long* c = clocks[s][b];
            const double ns = static_cast<double>(times[s][b][2] - times[s][b][1]);
            const double cycles = static_cast<double>(c[kPoints - 1] - c[1]);
            const double us_per_cycle = cycles > 0 ? ns / cycles / 1000.0 : 1.0 / 1980.0;
            const auto span = [&](int from, int to) { return (c[to] - c[from]) * us_per_cycle; };
            release.push_back((times[s][b][1] - last[s - 1]) / 1000.0);
            data.push_back(span(1, 2));
            steps.push_back(span(2, last_step));
            mma.push_back(span(last_step, 10));
            epilogue.push_back(span(10, 11));
            stores.push_back(span(11, 12));
            chain.push_back(ns / 1000.0);
          }
        }
        std::printf(",%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f", Quantile(period, 0.5),
                    Quantile(ahead, 0.5), Quantile(release, 0.5), Quantile(data, 0.5),
                    Quantile(steps, 0.5), Quantile(mma, 0.5), Quantile(epilogue, 0.5),
                    Quantile(stores, 0.5), Quantile(chain, 0.5), Quantile(chain, 0.9));
      }
      std::printf("\n");
      std::fflush(stdout);
      CUDA_CHECK(cudaGraphExecDestroy(exec));
      CUDA_CHECK(cudaGraphDestroy(graph));
      for (Layer& l : all) {
        CUDA_CHECK(cudaFree(l.latent));
        CUDA_CHECK(cudaFree(l.w));
        CUDA_CHECK(cudaFree(l.gate));
        CUDA_CHECK(cudaFree(l.out));
        CUDA_CHECK(cudaFree(l.lengths));
      }
    }
  }
  return 0;
}

}  // namespace mla_tail_bench

// Where a MlaValueWgmma block's time goes (bench/timeline_probe.h). This file includes the
// kernels' own source, mla/kernels/mla_value_wgmma.cu, with MLA_TIMELINE_STAMP recording thread
// 0's clock at each point of its block's chain: 0 entry, 1 the dependency wait returned (the
// first W_UV steps and the L2 prefetch issued before it), 2-9 K step 0-7's copies landed and
// published, 10 the last MMAs done, 11 the epilogue done (gate applied, tile in shared memory),
// 12 the stores issued. Built with PROBE_NO_STAMPS the kernels are the library's code and only
// the replay time counts.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace probe {
constexpr int kPoints = 13;
constexpr int kMaxBlocks = 1024;
constexpr int kLayers = 16;
__device__ int g_launches[kMaxBlocks];  // how many times each block index has started
__device__ long long g_clock[kLayers][kMaxBlocks][kPoints];
__device__ long long g_time[kLayers][kMaxBlocks][2];

// Thread 0 of each block: which launch (layer) this is, then the clock at each point and the
// global timer at the first and last.
__device__ __forceinline__ void Stamp(int point) {
  __shared__ int layer;
  if (threadIdx.x != 0) return;
  const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  if (block >= kMaxBlocks) return;
  if (point == 0) layer = atomicAdd(&g_launches[block], 1) % kLayers;
  g_clock[layer][block][point] = clock64();
  if (point == 0 || point == kPoints - 1) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    g_time[layer][block][point == 0 ? 0 : 1] = t;
  }
}
}  // namespace probe

#ifdef PROBE_NO_STAMPS
#define MLA_TIMELINE_STAMP(point)
constexpr bool kStamped = false;
#else
#define MLA_TIMELINE_STAMP(point) ::probe::Stamp(point)
constexpr bool kStamped = true;
#endif
#include "mla/kernels/mla_value_wgmma.cu"

#include "bench/cuda_check.h"
#include "bench/timeline_probe.h"

namespace mla {
// A configuration of MlaValueWgmmaKernel by its template arguments, whether or not the library's
// table (kWgConfigs) names it.
template <int kStages, int kCols, int kWarpgroups, int kMinBlocks, bool kEarly>
cudaError_t LaunchWgConfig(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
  using T = WgTile<kStages, kCols, kWarpgroups>;
  constexpr auto kKernel = MlaValueWgmmaKernel<kStages, kCols, kWarpgroups, kMinBlocks, kEarly>;
  static const cudaError_t loaded = LoadKernel(kKernel, T::kSmemBytes);
  if (loaded != cudaSuccess) return loaded;
  const dim3 grid(kValueDim / kCols, p.heads, (p.rows + T::kRows - 1) / T::kRows);
  return LaunchWithPdl(kKernel, grid, dim3(T::kThreads), T::kSmemBytes, stream, pdl, p);
}
}  // namespace mla

namespace mla_bench {
namespace {

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

struct Layer {
  mla::bf16 *latent, *w, *gate, *out;
  int32_t* lengths;
};

}  // namespace

int RunTimelineProbe() {
  using probe::kLayers;
  using probe::kMaxBlocks;
  using probe::kPoints;
  const int shapes[][2] = {{8, 1024}, {16, 512}, {32, 256}, {64, 128}, {128, 64}, {12, 512}};
  using Launcher = cudaError_t (*)(const mla::MlaValueParams&, cudaStream_t, bool);
  const struct {
    const char* name;
    int cols;
    Launcher launch;
  } variants[] = {
      {"n128w1", 128, mla::LaunchWgConfig<3, 128, 1, 0, false>},
      {"n128", 128, mla::LaunchWgConfig<3, 128, 2, 2, false>},
      {"n128w4", 128, mla::LaunchWgConfig<3, 128, 4, 2, false>},
      {"p6", 64, mla::LaunchWgConfig<6, 64, 1, 1, false>},
      {"n128w1-again", 128, mla::LaunchWgConfig<3, 128, 1, 0, false>},
      {"n128-again", 128, mla::LaunchWgConfig<3, 128, 2, 2, false>},
      {"n128w4-again", 128, mla::LaunchWgConfig<3, 128, 4, 2, false>},
      {"p6-again", 64, mla::LaunchWgConfig<6, 64, 1, 1, false>},
  };
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::printf("heads,rows,variant,blocks,us_per_layer");
  if (kStamped) {
    std::printf(",period_us,start_after_prev_end_us,start_spread_us,span_us");
    for (int p = 1; p < kPoints; ++p) std::printf(",p%d_p50,p%d_p90", p, p);
  }
  std::printf("\n");
  static long long clocks[kLayers][kMaxBlocks][kPoints];
  static long long times[kLayers][kMaxBlocks][2];
  for (const auto& sh : shapes) {
    const int heads = sh[0], rows = sh[1];
    const size_t latent_n = size_t{1} * rows * heads * 512, w_n = size_t{1} * heads * 128 * 512;
    const size_t out_n = size_t{1} * rows * heads * 128;
    std::vector<Layer> layers(kLayers);
    for (Layer& l : layers) {
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
    for (const auto& var : variants) {
      const int blocks = (128 / var.cols) * heads * ((rows + 63) / 64);
      if (blocks > kMaxBlocks) continue;
      // All layers' tails back to back in one graph, with PDL, as tail_bench's embedded graph.
      cudaGraph_t graph;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (const Layer& l : layers) {
        const mla::MlaValueParams params{l.latent,  heads * 512, l.w,   128 * 512,
                                         512,       l.gate,      heads * 128, l.lengths,
                                         l.out,     heads * 128, heads, rows, 1};
        CUDA_CHECK(var.launch(params, stream, true));
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
        replay_us.push_back(ms * 1000.0 / kLayers);
      }
      std::printf("%d,%d,%s,%d,%.3f", heads, rows, var.name, blocks, Quantile(replay_us, 0.5));
      if constexpr (kStamped) {
        static int zeros[kMaxBlocks];
        CUDA_CHECK(cudaMemcpyToSymbol(probe::g_launches, zeros, sizeof(zeros)));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaMemcpyFromSymbol(clocks, probe::g_clock, sizeof(clocks)));
        CUDA_CHECK(cudaMemcpyFromSymbol(times, probe::g_time, sizeof(times)));
        // Per layer: first entry, last stores issued.
        std::vector<long long> first(kLayers), last(kLayers);
        for (int l = 0; l < kLayers; ++l) {
          first[l] = times[l][0][0];
          last[l] = times[l][0][1];
          for (int b = 0; b < blocks; ++b) {
            first[l] = std::min(first[l], times[l][b][0]);
            last[l] = std::max(last[l], times[l][b][1]);
          }
        }
        // The middle layers' blocks.
        std::vector<std::vector<double>> at(kPoints);
        std::vector<double> period, gap, spread, span;
        for (int l = 4; l < kLayers - 2; ++l) {
          period.push_back((first[l + 1] - first[l]) / 1000.0);
          gap.push_back((first[l] - last[l - 1]) / 1000.0);
          span.push_back((last[l] - first[l]) / 1000.0);
          for (int b = 0; b < blocks; ++b) {
            const double ns = static_cast<double>(times[l][b][1] - times[l][b][0]);
            const double cycles = static_cast<double>(clocks[l][b][kPoints - 1] - clocks[l][b][0]);
            const double us_per_cycle = cycles > 0 ? ns / cycles / 1000.0 : 1.0 / 1980.0;
            spread.push_back((times[l][b][0] - first[l]) / 1000.0);
            for (int p = 1; p < kPoints; ++p) {
              at[p].push_back((clocks[l][b][p] - clocks[l][b][0]) * us_per_cycle);
            }
          }
        }
        std::printf(",%.3f,%.3f,%.3f,%.3f", Quantile(period, 0.5), Quantile(gap, 0.5),
                    Quantile(spread, 0.9), Quantile(span, 0.5));
        for (int p = 1; p < kPoints; ++p) {
          std::printf(",%.3f,%.3f", Quantile(at[p], 0.5), Quantile(at[p], 0.9));
        }
      }
      std::printf("\n");
      CUDA_CHECK(cudaGraphExecDestroy(exec));
      CUDA_CHECK(cudaGraphDestroy(graph));
    }
    for (Layer& l : layers) {
      CUDA_CHECK(cudaFree(l.latent));
      CUDA_CHECK(cudaFree(l.w));
      CUDA_CHECK(cudaFree(l.gate));
      CUDA_CHECK(cudaFree(l.out));
      CUDA_CHECK(cudaFree(l.lengths));
    }
  }
  return 0;
}

}  // namespace mla_bench

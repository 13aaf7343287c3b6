// Where a fused block's time goes (bench/timeline_probe.h). Built twice: linked with
// //bench:stamped_kernels (TIMELINE_PROBE_STAMPED: the kernels' own sources with the timeline
// stamps of bench/timeline_stamps.cuh, where thread 0 of each block records its clock at each
// point of its chain and the global timer at entry, at the dependency wait's return and at the
// last point), and linked with //mla:kernels, the library's code, for the replay times alone.
// The points:
//   0  entry
//   1  the dependency wait returned (W_UV's first steps and the L2 prefetch issued before it)
//   2  ColumnSplit, LatentSplit: the latent in registers or shared memory; Tile: K
//      step 0's copies landed and published. 3-9: Tile's K steps 1-7 likewise; 3 in
//      ColumnSplit: its W_UV words (loaded before the wait) in registers, after point 2
//   10 the last MMAs done (LatentSplit: every warp's partial sums in shared memory)
//   11 the epilogue done (gate applied; Tile: the tile in shared memory)
//   12 the stores issued

#include "bench/timeline_probe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/timeline_record.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla_tail/mla/dispatch.h"

#ifdef TIMELINE_PROBE_STAMPED
constexpr bool kStamped = true;
#else
constexpr bool kStamped = false;
#endif

namespace mla_tail_bench {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

struct Layer {
  mla_tail::bf16 *latent, *w, *gate, *out;  // w: bf16, or e4m3 in its first half
  int32_t* lengths;
  float* w_scales;  // e4m3: 4 a head
};

// The shapes of tensor-parallel deployments (8-16 heads a GPU), 1-1024 rows; or many heads at
// few rows. q = 1.
const std::vector<int> kTpHeads = {8, 12, 16};
const std::vector<int> kTpRows = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
const std::vector<int> kManyHeads = {32, 64, 96, 128};
const std::vector<int> kManyHeadsRows = {1, 2, 4, 8, 16};

}  // namespace

int RunTimelineProbe(const TimelineProbeOptions& options) {
  const bool e4m3 = options.e4m3_weights;
  const mla_tail::WeightType weight =
      e4m3 ? mla_tail::WeightType::kE4m3 : mla_tail::WeightType::kBf16;
  constexpr int kMaxBlocks = kTimelineMaxBlocks;
  constexpr int kPoints = kTimelinePoints;
  constexpr int kSlots = kTimelineSlots;
  int device = 0, multiprocessors = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(mla_tail::internal::LoadTailKernels());
  TimelineRecord* record = nullptr;
  if (kStamped) {
    CUDA_CHECK(cudaMalloc(&record, sizeof(TimelineRecord)));
    CUDA_CHECK(cudaMemset(record, 0, sizeof(TimelineRecord)));
    CUDA_CHECK(SetTimelineRecord(record));
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  // Phases, medians over the middle layers' blocks (p90 for the chain): release = the wait's
  // return after the previous layer's last store; data = wait to the first latent landed;
  // steps = the later K steps (ColumnSplit: the latent landed to its W_UV in registers); mma =
  // the last step to the last MMAs (ColumnSplit: with e4m3 W_UV, its dequantization); epilogue;
  // stores;
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
  for (const int heads : options.many_heads ? kManyHeads : kTpHeads) {
    for (const int rows : options.many_heads ? kManyHeadsRows : kTpRows) {
      const mla_tail::FusedKernel kernel =
          mla_tail::DispatchFusedKernel(heads, rows, multiprocessors, weight);
      if (kernel == mla_tail::FusedKernel::kPersistent128x128) continue;  // it has no stamps
      // A launch depends on the shape and on whether there is a gate (the layers have one; the
      // plan never reads it).
      static const mla_tail::bf16 kAnyGate{};
      static const mla_tail::fp8_e4m3 kAnyE4m3{};
      mla_tail::internal::FusedTailParams planned = {};
      planned.heads = heads;
      planned.rows = rows;
      planned.q = 1;
      planned.gate = &kAnyGate;
      if (e4m3) planned.w_uv_fp8 = &kAnyE4m3;
      mla_tail::internal::KernelLaunch launch;
      CUDA_CHECK(mla_tail::internal::PlanFusedKernel(planned, kernel, multiprocessors, &launch));
      const int blocks = static_cast<int>(launch.grid.x * launch.grid.y * launch.grid.z);
      if (blocks > kMaxBlocks) continue;
      const size_t latent_n = size_t{1} * rows * heads * 512;
      const size_t w_n = size_t{1} * heads * 128 * 512;
      const size_t out_n = size_t{1} * rows * heads * 128;
      const size_t bytes = 2 * (latent_n + 2 * out_n) + (e4m3 ? 1 : 2) * w_n + 4 * size_t(rows);
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
        l.w_scales = nullptr;
        if (e4m3) {
          const std::vector<float> scales(size_t{4} * heads, 1.0f / 128);
          CUDA_CHECK(cudaMalloc(&l.w_scales, scales.size() * sizeof(float)));
          CUDA_CHECK(cudaMemcpy(l.w_scales, scales.data(), scales.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
        }
      }
      // All layers' tails back to back in one graph, with PDL, as tail_bench's embedded graph.
      cudaGraph_t graph;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (const Layer& l : all) {
        mla_tail::TailBuffers buffers =
            mla_tail::CompactBuffers({heads, rows, 1}, l.latent, l.w, l.gate, l.lengths, l.out);
        if (e4m3) {
          buffers.w_uv = nullptr;
          buffers.w_uv_fp8 = reinterpret_cast<const mla_tail::fp8_e4m3*>(l.w);
          buffers.w_uv_scale = l.w_scales;
          buffers.w_uv_scale_head_stride = 4;
        }
        const mla_tail::internal::FusedTailParams params =
            mla_tail::internal::MakeFusedTailParams({heads, rows, 1}, buffers);
        CUDA_CHECK(mla_tail::internal::LaunchKernel(launch, &params, stream, /*pdl=*/true));
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
      std::printf("%d,%d,%s%s,%d,%d,%.3f", heads, rows, mla_tail::FusedKernelName(kernel),
                  e4m3 ? "/e4m3" : "", blocks, layers, Quantile(replay_us, 0.5));
      if (kStamped) {
        CUDA_CHECK(cudaMemset(record->launches, 0, sizeof(record->launches)));
        CUDA_CHECK(cudaGraphLaunch(exec, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        CUDA_CHECK(cudaMemcpy(clocks, record->clock, sizeof(clocks), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(times, record->time, sizeof(times), cudaMemcpyDeviceToHost));
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
        const int last_step = wgmma ? 9 : kernel == mla_tail::FusedKernel::kColumnSplit ? 3 : 2;
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
        if (l.w_scales != nullptr) CUDA_CHECK(cudaFree(l.w_scales));
      }
    }
  }
  if (record != nullptr) CUDA_CHECK(cudaFree(record));
  return 0;
}

}  // namespace mla_tail_bench

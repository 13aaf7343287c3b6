// LatentSplit: the fused W_UV projection and sigmoid gate with the latent axis split over a
// block's warps, for grids of few rows.
//
// One block per (16 output columns, head, kRows rows): 8 warps with 8 rows, 4 with 16. Warp w
// multiplies latent values [w, w + 1) * 512 / kWarps for both 8-column tiles of the block: 8 or 16
// m16n8k16 MMAs after the dependency wait instead of ColumnSplit's 32 a warp (column_split.cu), and
// more multiprocessors fetching the same W_UV bytes. Each thread loads its W_UV B-fragments into
// registers before the wait (weights are written by no upstream kernel; the block's latent, gate
// and lengths only get an L2 prefetch hint there, prefetch.cuh) and its latent A-fragments, rows
// group and group + 8, straight into registers after it. The warps' partial sums meet in 4 KB of
// shared memory; warp j adds those of tile j in warp order, applies the gate and stores.
//
// Shared memory stays at 4 KB a block: after an upstream kernel that holds none, a block of 8 KB
// measured 0.5-1.0 µs later to start (docs/design.md).
//
// k permutation: as ColumnSplit's. Thread (group g, quarter p) loads latent indices
// 32c + 8p .. 32c + 8p + 7 of W_UV column g as one 16-byte word per 32-wide chunk c, and the A
// fragment with the same permutation, so the products pair the same latent index on both sides.
//
// e4m3 W_UV (fp8.cuh): 16-byte e4m3 words of two chunks each, in the k permutation for them
// (device::ChunkStart), kept as loaded until their chunk's MMAs and dequantized to bf16
// there with their block's scale (a warp's chunks lie in one latent block): the dependency wait
// and the latent's loads are not held up behind the conversion, which then overlaps the latent's
// round trip.
//
// e4m3 output: a head's 8 column blocks are one cluster (LatentSplitE4m3OutputKernel; they share
// their rows, so they run or leave together); each tile warp's amax of a row over its 8 columns
// (a group's 4 lanes) is stored into every block of the cluster through distributed shared
// memory (device::ClusterRowAmax), and read locally once the block's copy is complete. Every warp
// stays to the end: the cluster barrier that orders those stores after each block's start counts
// all threads.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mla/kernels/device.cuh"
#include "mla/kernels/fp8.cuh"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/timeline_stamps.cuh"

namespace mla_tail::internal {
namespace {

constexpr int kColumns = 16;  // two n8 tiles

// The gate loads of each form (device::GateLoads): the bf16 kernels serve the tail with a gate and
// without as one kernel, which without a gate (p.gate null) loads none and gates with
// kNoGateWord, whose sigmoid is 1 (kOrNone); the others load plainly (kPlain) or, without a gate,
// none (kNone). Compiled apart, the ungated bf16 kernel measured up to 10% slower than the gated
// one at the same shapes, and the gated one with plain loads 0.90-1.04x the time; with the e4m3
// output the null check measured 1.02-1.05x slower at 8-16 heads x 1-8 rows, and the e4m3 W_UV
// forms keep the code their rule was drawn from (docs/design.md, "No gate").
using device::GateLoads;

template <bool kGated, WeightType kW, OutputType kO>
constexpr GateLoads kGateLoadsOf = (kW == WeightType::kBf16 && kO == OutputType::kBf16)
                                       ? GateLoads::kOrNone
                                   : kGated ? GateLoads::kPlain
                                            : GateLoads::kNone;

// kRows: 8 (one m16 tile whose rows 8-15 are zeros) or 16. kGate kNone: the tail without a
// gate (out = bf16(v)), which loads none.
template <int kRows, int kWarps, GateLoads kGate, WeightType kW, OutputType kO>
__device__ __forceinline__ void LatentSplitBlock(const FusedTailParams& p) {
  static_assert(kGate != GateLoads::kWords, "not a LatentSplit form");
  constexpr bool kGated = device::Gated(kGate);
  constexpr bool kGateMayBeNull = device::GateMayBeNull(kGate);
  constexpr int kHalves = kRows / 8;  // of the m16 tile: rows group and group + 8
  constexpr int kTiles = kColumns / 8;
  constexpr int kChunks = kLatentDim / 32 / kWarps;  // 32-value chunks a warp
  static_assert(kTiles <= kWarps, "a warp reduces each tile");
  static_assert(sizeof(float) * kWarps * kTiles * 32 * 2 * kHalves <= 4096, "4 KB (above)");
  // With 8 rows only accumulators 0 and 1 (row group) hold products.
  using Partial = typename std::conditional<kHalves == 2, float4, float2>::type;
  __shared__ Partial partials[kWarps][kTiles][32];

  const int column0 = blockIdx.x * kColumns;
  const int head = blockIdx.y;
  const int t0 = blockIdx.z * kRows;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const int chunk0 = warp * kChunks;

  // The e4m3 output's amax exchange (below).
  using RowAmax = device::ClusterRowAmax<kValueDim / kColumns, kTiles, kRows>;
  if constexpr (kO == OutputType::kE4m3) device::SharedObject<RowAmax>().Start();
  MLA_TIMELINE_STAMP(0);
  // W_UV before the wait: weights are written by no upstream kernel.
  uint4 w_fragment[kTiles][kW == WeightType::kBf16 ? kChunks : 1];
  uint4 raw[kTiles][kW == WeightType::kE4m3 ? kChunks / 2 : 1];  // chunks 2i, 2i + 1
  float scale = 0.0f;
  if constexpr (kW == WeightType::kBf16) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const bf16* w_column = p.w_uv + head * p.w_head_stride +
                             static_cast<int64_t>(column0 + 8 * j + group) * p.w_row_stride +
                             32 * chunk0 + 8 * quarter;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) w_fragment[j][c] = device::LoadWeight16(w_column + 32 * c);
    }
  } else {
    // The warp's block scale is read alone, and first used after the dependency wait: a select
    // among the head's four scales before the wait held the warp there until they had landed
    // (0.81-0.89x the time at 8-16 heads x 1-8 rows without it). The 16-row e4m3-output kernel
    // keeps that select, which measured 2-7% faster there (docs/design.md).
    constexpr bool kSelectBeforeWait = kRows == 16 && kO == OutputType::kE4m3;
    float4 scales;
    if constexpr (kSelectBeforeWait) scales = device::LoadBlockScales<kW>(p, head);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const fp8_e4m3* w_column = p.w_uv_fp8 + head * p.w_head_stride +
                                 static_cast<int64_t>(column0 + 8 * j + group) * p.w_row_stride +
                                 32 * chunk0 + device::ChunkStart<kW>(0, quarter);
#pragma unroll
      for (int i = 0; i < kChunks / 2; ++i) {
        raw[j][i] = device::LoadWeight16(w_column + device::ChunkStart<kW>(2 * i, 0));
      }
    }
    // A warp's chunks lie in one latent block: kChunks (2 or 4) consecutive ones from a multiple.
    static_assert(4 % kChunks == 0, "a warp's chunks within one block");
    if constexpr (kSelectBeforeWait) {
      scale = device::BlockScale(scales, chunk0 / 4);
    } else {
      scale = device::LoadBlockScale(p, head, chunk0 / 4);
    }
  }
  device::PrefetchBlockInputsL2<kGated, kGateMayBeNull>(p, head, t0, kRows, 0, kLatentDim, column0,
                                                        kColumns);
  const int rows_before_wait = device::LiveRowsBeforeWait(p.row_count, p.row_count_early, p.rows);

  device::GridDependencyWait();
  MLA_TIMELINE_STAMP(1);
  // Rows at and past the live count are neither read nor written, except that rows below
  // read_rows may be read where rows past the count are readable.
  const int read_rows =
      device::ReadRowsAfterWait(p.row_count, rows_before_wait, p.rows_past_count_readable, p.rows);
  if (t0 >= read_rows) return;
  const int rows_as_loaded = device::LiveRowsAsLoaded(p.row_count, p.row_count_early,
                                                      p.rows_past_count_readable, read_rows);

  // Rows past the end read the last row, whose products are never stored.
  const bf16* latent_head =
      p.latent + head * kLatentDim + 32 * chunk0 + device::ChunkStart<kW>(0, quarter);
  uint4 a_rows[kHalves][kChunks];
#pragma unroll
  for (int half = 0; half < kHalves; ++half) {
    const bf16* row = latent_head + min(t0 + group + 8 * half, read_rows - 1) * p.latent_row_stride;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      a_rows[half][c] = *reinterpret_cast<const uint4*>(row + device::ChunkStart<kW>(c, 0));
    }
  }
  // The outputs of warp `warp`'s tile: rows group (+8), columns 2q, 2q+1 of the tile. Their gate
  // words and lengths are loaded without branches, all in flight beside the latent.
  const int out_column = head * kValueDim + column0 + 8 * warp + 2 * quarter;
  uint32_t gate_word[kHalves] = {};
  int32_t length[kHalves] = {};
  if (warp < kTiles) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int t = min(t0 + group + 8 * half, read_rows - 1);
      if constexpr (kGate == GateLoads::kOrNone) {
        gate_word[half] = device::GateWordOrNone(p.gate, t * p.gate_row_stride + out_column);
      } else if constexpr (kGate == GateLoads::kPlain) {
        gate_word[half] =
            *reinterpret_cast<const uint32_t*>(p.gate + t * p.gate_row_stride + out_column);
      }
      length[half] = p.lengths[t / p.q];
    }
  }
  // All of this grid's upstream-written inputs are in flight: the next kernel may start.
  device::LaunchDependents();
  // A block of none of the live rows leaves once its loads are issued. The branch also keeps
  // ptxas from scheduling MMAs, which wait for the latent, ahead of launch_dependents: without
  // it the trigger waited for the latent's round trip (docs/design.md).
  const int rows = device::ClampRows(rows_as_loaded, p.rows);
  if (t0 >= rows) return;

  MLA_TIMELINE_STAMP_AFTER(2, a_rows[0][0].x ^ a_rows[kHalves - 1][kChunks - 1].w);

  // Per tile, a chain for each of the two MMAs of a chunk: with both tiles, four chains.
  float acc[kTiles][2][4] = {};
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const uint4 x = a_rows[0][c];
    const uint4 y = kHalves == 2 ? a_rows[kHalves - 1][c] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      uint4 w;
      if constexpr (kW == WeightType::kBf16) {
        w = w_fragment[j][c];
      } else {
        w = device::DequantizeE4m3x8(device::E4m3Half(raw[j][c / 2], c % 2), scale);
      }
      float(&chain)[2][4] = acc[j];
      device::MmaBf16(chain[0], x.x, y.x, x.y, y.y, w.x, w.y);
      device::MmaBf16(chain[1], x.z, y.z, x.w, y.w, w.z, w.w);
    }
  }
  // Accumulator e of an m16n8 tile: row group (+8 for e >= 2), column 2q + (e & 1).
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    float s[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) s[e] = acc[j][0][e] + acc[j][1][e];
    if constexpr (kHalves == 2) {
      partials[warp][j][lane] = make_float4(s[0], s[1], s[2], s[3]);
    } else {
      partials[warp][j][lane] = make_float2(s[0], s[1]);
    }
  }
  __syncthreads();
  MLA_TIMELINE_STAMP(10);
  if constexpr (kO == OutputType::kBf16) {
    if (warp >= kTiles) return;
  }
  // With the e4m3 output the other warps compute tile 0's values again, unstored.
  const int tile = warp < kTiles ? warp : 0;
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const Partial s = partials[w][tile][lane];
    sum[0] += s.x;
    sum[1] += s.y;
    if constexpr (kHalves == 2) {
      sum[2] += s.z;
      sum[3] += s.w;
    }
  }

  float v[2 * kHalves];
  bool active[kHalves];
  uint32_t out[kHalves];
#pragma unroll
  for (int half = 0; half < kHalves; ++half) {
    v[2 * half] = __bfloat162float(__float2bfloat16_rn(sum[2 * half]));
    v[2 * half + 1] = __bfloat162float(__float2bfloat16_rn(sum[2 * half + 1]));
    active[half] = length[half] > 0;
  }
  device::EpiloguePairs<kGated>(v, gate_word, active, out);
  MLA_TIMELINE_STAMP_AFTER(11, out[0] ^ out[kHalves - 1]);
  if constexpr (kO == OutputType::kBf16) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int t = t0 + group + 8 * half;
      if (t >= rows) continue;
      *reinterpret_cast<uint32_t*>(p.output + t * p.output_row_stride + out_column) = out[half];
    }
  } else {
    // Row r's parts: each tile's amax over its 8 columns, from each block of the cluster.
    RowAmax& amax = device::SharedObject<RowAmax>();
    amax.AwaitStarts();
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const uint32_t m = device::GroupMax<4>(device::Bf16x2MagnitudeMax(out[half]));
      if (warp < kTiles && quarter == 0) amax.Publish(group + 8 * half, warp, m);
    }
    amax.Await();
    const bool scale_writer = device::ClusterRank() == 0 && warp == 0 && quarter == 0;
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const device::OutputScale scale = device::OutputScaleOf(amax.Max(group + 8 * half));
      const float2 x = device::Bf16x2ToFloat2(out[half]);
      const uint16_t q = device::QuantizeE4m3x2(x.x, x.y, scale.inverse, scale.zero);
      const int t = t0 + group + 8 * half;
      if (warp >= kTiles || t >= rows) continue;
      *reinterpret_cast<uint16_t*>(p.output_fp8 + t * p.output_row_stride + out_column) = q;
      if (scale_writer) {
        p.output_scale[t * p.output_scale_row_stride + head * p.output_scale_head_stride] =
            scale.scale;
      }
    }
  }
  MLA_TIMELINE_STAMP(12);
}

template <int kRows, int kWarps, GateLoads kGate, WeightType kW>
__global__ void __launch_bounds__(32 * kWarps) LatentSplitKernel(const FusedTailParams p) {
  LatentSplitBlock<kRows, kWarps, kGate, kW, OutputType::kBf16>(p);
}

// The e4m3 output: a head's 8 column blocks in one cluster.
template <int kRows, int kWarps, GateLoads kGate, WeightType kW>
__global__ void __launch_bounds__(32 * kWarps) __cluster_dims__(kValueDim / kColumns, 1, 1)
    LatentSplitE4m3OutputKernel(const FusedTailParams p) {
  LatentSplitBlock<kRows, kWarps, kGate, kW, OutputType::kE4m3>(p);
}

// 8 rows: 8 warps of 2 chunks each; 16 rows (twice the A fragments and partial sums): 4 warps
// of 4 chunks, which keeps the partial sums at 4 KB.
template <int kRows>
constexpr int kWarpsFor = kRows == 8 ? 8 : 4;

// The kernel for the tail with a gate (kGated) or without.
template <int kRows, bool kGated, WeightType kW, OutputType kO>
constexpr void (*LatentSplitKernelOf())(const FusedTailParams) {
  constexpr GateLoads kGate = kGateLoadsOf<kGated, kW, kO>;
  if constexpr (kO == OutputType::kE4m3) {
    return LatentSplitE4m3OutputKernel<kRows, kWarpsFor<kRows>, kGate, kW>;
  } else {
    return LatentSplitKernel<kRows, kWarpsFor<kRows>, kGate, kW>;
  }
}

template <int kRows, WeightType kW, OutputType kO>
KernelLaunch LatentSplitLaunch(int heads, int rows, bool gated) {
  KernelLaunch launch;
  launch.function =
      gated ? reinterpret_cast<const void*>(LatentSplitKernelOf<kRows, true, kW, kO>())
            : reinterpret_cast<const void*>(LatentSplitKernelOf<kRows, false, kW, kO>());
  launch.grid = dim3(kValueDim / kColumns, heads, (rows + kRows - 1) / kRows);
  launch.block = dim3(32 * kWarpsFor<kRows>);
  launch.smem_bytes = 0;  // static only
  return launch;
}

}  // namespace

template <WeightType kW, OutputType kO>
KernelLaunch PlanLatentSplit(int heads, int rows, bool gated) {
  return rows <= 8 ? LatentSplitLaunch<8, kW, kO>(heads, rows, gated)
                   : LatentSplitLaunch<16, kW, kO>(heads, rows, gated);
}
template KernelLaunch PlanLatentSplit<WeightType::kBf16, OutputType::kBf16>(int, int, bool);
template KernelLaunch PlanLatentSplit<WeightType::kE4m3, OutputType::kBf16>(int, int, bool);
template KernelLaunch PlanLatentSplit<WeightType::kBf16, OutputType::kE4m3>(int, int, bool);
template KernelLaunch PlanLatentSplit<WeightType::kE4m3, OutputType::kE4m3>(int, int, bool);

cudaError_t LoadLatentSplit() {
  cudaError_t e = cudaSuccess;
  ForEachTypes([&](auto w, auto o) {
    constexpr WeightType kW = decltype(w)::value;
    constexpr OutputType kO = decltype(o)::value;
    for (const void* kernel :
         {reinterpret_cast<const void*>(LatentSplitKernelOf<8, true, kW, kO>()),
          reinterpret_cast<const void*>(LatentSplitKernelOf<16, true, kW, kO>()),
          reinterpret_cast<const void*>(LatentSplitKernelOf<8, false, kW, kO>()),
          reinterpret_cast<const void*>(LatentSplitKernelOf<16, false, kW, kO>())}) {
      if (e == cudaSuccess) e = LoadKernel(kernel, 0);
    }
  });
  return e;
}

}  // namespace mla_tail::internal

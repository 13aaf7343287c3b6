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

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mla/kernels/device.cuh"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/timeline_stamps.cuh"

namespace mla_tail::internal {
namespace {

constexpr int kColumns = 16;  // two n8 tiles

// kRows: 8 (one m16 tile whose rows 8-15 are zeros) or 16.
template <int kRows, int kWarps>
__global__ void __launch_bounds__(32 * kWarps) LatentSplitKernel(const FusedTailParams p) {
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

  MLA_TIMELINE_STAMP(0);
  // W_UV before the wait: weights are written by no upstream kernel.
  uint4 w_fragment[kTiles][kChunks];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const bf16* w_column = p.w_uv + head * p.w_head_stride +
                           static_cast<int64_t>(column0 + 8 * j + group) * p.w_row_stride +
                           32 * chunk0 + 8 * quarter;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) w_fragment[j][c] = device::LoadWeight16(w_column + 32 * c);
  }
  device::PrefetchBlockInputsL2(p, head, t0, kRows, 0, kLatentDim, column0, kColumns);

  device::GridDependencyWait();
  MLA_TIMELINE_STAMP(1);

  // Rows past the end read the last row, whose products are never stored.
  const bf16* latent_head = p.latent + head * kLatentDim + 32 * chunk0 + 8 * quarter;
  uint4 a_rows[kHalves][kChunks];
#pragma unroll
  for (int half = 0; half < kHalves; ++half) {
    const bf16* row = latent_head + min(t0 + group + 8 * half, p.rows - 1) * p.latent_row_stride;
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      a_rows[half][c] = *reinterpret_cast<const uint4*>(row + 32 * c);
  }
  // The outputs of warp `warp`'s tile: rows group (+8), columns 2q, 2q+1 of the tile. Their gate
  // words and lengths are loaded without branches, all in flight beside the latent.
  const int out_column = head * kValueDim + column0 + 8 * warp + 2 * quarter;
  uint32_t gate_word[kHalves] = {};
  int32_t length[kHalves] = {};
  if (warp < kTiles) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int t = min(t0 + group + 8 * half, p.rows - 1);
      gate_word[half] =
          *reinterpret_cast<const uint32_t*>(p.gate + t * p.gate_row_stride + out_column);
      length[half] = p.lengths[t / p.q];
    }
  }
  // All of this grid's upstream-written inputs are in flight: the next kernel may start.
  device::LaunchDependents();

  MLA_TIMELINE_STAMP_AFTER(2, a_rows[0][0].x ^ a_rows[kHalves - 1][kChunks - 1].w);

  // Per tile, a chain for each of the two MMAs of a chunk: with both tiles, four chains.
  float acc[kTiles][2][4] = {};
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const uint4 x = a_rows[0][c];
    const uint4 y = kHalves == 2 ? a_rows[kHalves - 1][c] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      float(&chain)[2][4] = acc[j];
      device::MmaBf16(chain[0], x.x, y.x, x.y, y.y, w_fragment[j][c].x, w_fragment[j][c].y);
      device::MmaBf16(chain[1], x.z, y.z, x.w, y.w, w_fragment[j][c].z, w_fragment[j][c].w);
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
  if (warp >= kTiles) return;
  float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const Partial s = partials[w][warp][lane];
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
  device::GatePairs(v, gate_word, active, out);
  MLA_TIMELINE_STAMP_AFTER(11, out[0] ^ out[kHalves - 1]);
#pragma unroll
  for (int half = 0; half < kHalves; ++half) {
    const int t = t0 + group + 8 * half;
    if (t >= p.rows) continue;
    *reinterpret_cast<uint32_t*>(p.output + t * p.output_row_stride + out_column) = out[half];
  }
  MLA_TIMELINE_STAMP(12);
}

// 8 rows: 8 warps of 2 chunks each; 16 rows (twice the A fragments and partial sums): 4 warps
// of 4 chunks, which keeps the partial sums at 4 KB.
template <int kRows>
constexpr int kWarpsFor = kRows == 8 ? 8 : 4;

template <int kRows>
KernelLaunch LatentSplitLaunch(int heads, int rows) {
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(LatentSplitKernel<kRows, kWarpsFor<kRows>>);
  launch.grid = dim3(kValueDim / kColumns, heads, (rows + kRows - 1) / kRows);
  launch.block = dim3(32 * kWarpsFor<kRows>);
  launch.smem_bytes = 0;  // static only
  return launch;
}

}  // namespace

KernelLaunch PlanLatentSplit(int heads, int rows) {
  return rows <= 8 ? LatentSplitLaunch<8>(heads, rows) : LatentSplitLaunch<16>(heads, rows);
}

cudaError_t LoadLatentSplit() {
  const cudaError_t e = LoadKernel(LatentSplitKernel<8, kWarpsFor<8>>, 0);
  return e != cudaSuccess ? e : LoadKernel(LatentSplitKernel<16, kWarpsFor<16>>, 0);
}

}  // namespace mla_tail::internal

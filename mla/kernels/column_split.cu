// ColumnSplit: the fused W_UV projection and sigmoid gate.
//
// One 128-thread block per (32 output columns, head, 8, 16 or 32 rows). Warp w owns columns
// 8w..8w+7 of the block's 32 over the whole latent: its W_UV B-fragments (16 x 16 bytes a
// thread) are loaded into registers before the dependency wait, since no upstream kernel writes
// weights (the block's latent, gate and lengths only get an L2 prefetch hint there,
// prefetch.cuh); then each thread loads its latent A-fragments into registers (8 rows) or the
// block stages its rows in padded shared memory (16 or 32), and runs m16n8k16 BF16 MMAs with
// FP32 accumulation: two chains per tile, four with 8 rows (below).
//
// k permutation: thread (group g, quarter p) loads latent indices 32c + 8p .. 32c + 8p + 7 of
// W_UV column g as one 16-byte word per 32-wide chunk c. MMA s (0, 1) of the chunk takes words
// 2s, 2s+1 as its B registers, which the MMA reads as k = 2p, 2p+1 and 2p+8, 2p+9. The A
// fragment is loaded with the same permutation (16 bytes per row at the same offset), so the
// products pair the same latent index on both sides: a dot product is order-free.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/timeline_stamps.cuh"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {
namespace {

constexpr int kThreads = 128;
constexpr int kColumnsPerBlock = 32;
constexpr int kChunks = kLatentDim / 32;   // 16 chunks of 32 latent values
constexpr int kSmemRow = kLatentDim + 32;  // padded row (elements): rows g and g+1 hit other banks
constexpr int kWordsPerRow = kLatentDim / 8;  // 16-byte words per latent row

// A block's rows: 8 (one m16 tile whose rows 8-15 are zeros), 16 (one tile) or 32 (two). With
// 8 the latent goes straight into registers (no shared memory); 16 and 32 stage it in shared
// memory (in registers, 16 rows take 210 registers a thread and measured slower).
template <int kTileRows>
constexpr size_t SmemBytes() {
  return kTileRows == 8 ? 0 : size_t{kTileRows} * kSmemRow * sizeof(bf16);
}

template <int kTileRows>
__device__ __forceinline__ void ColumnSplitBlock(const FusedTailParams& p) {
  constexpr int kRowTiles = kTileRows == 32 ? 2 : 1;
  constexpr int kRows = 16 * kRowTiles;
  constexpr bool kDirect = kTileRows == 8;
  constexpr int kHalves = kDirect ? 1 : 2;  // of each m16 tile: rows group and group + 8
  extern __shared__ uint4 smem_words[];
  bf16* rows_smem = reinterpret_cast<bf16*>(smem_words);  // [kRows][kSmemRow]

  const int chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int t0 = blockIdx.z * kTileRows;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const int column = chunk * kColumnsPerBlock + warp * 8;  // first of the warp's 8 columns

  MLA_TIMELINE_STAMP(0);
  // W_UV before the wait: weights are written by no upstream kernel.
  const bf16* w_column = p.w_uv + head * p.w_head_stride +
                         static_cast<int64_t>(column + group) * p.w_row_stride + 8 * quarter;
  uint4 w_fragment[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) w_fragment[c] = device::LoadWeight16(w_column + 32 * c);
  device::PrefetchBlockInputsL2(p, head, t0, kTileRows, 0, kLatentDim, chunk * kColumnsPerBlock,
                                kColumnsPerBlock);

  device::GridDependencyWait();
  MLA_TIMELINE_STAMP(1);

  const bf16* latent_head = p.latent + head * kLatentDim;
  // 8 rows: each thread loads its A fragments (row `group`, the k permutation of W_UV) straight
  // into registers, with no shared-memory hop or block barrier; rows past the end read the last
  // row, whose products are never stored. Without shared memory the blocks can also start on
  // multiprocessors an upstream kernel has configured for its own (docs/design.md).
  uint4 a_rows[kDirect ? kChunks : 1];
  if constexpr (kDirect) {
    const bf16* row = latent_head + min(t0 + group, p.rows - 1) * p.latent_row_stride + 8 * quarter;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) a_rows[c] = *reinterpret_cast<const uint4*>(row + 32 * c);
  } else {
    for (int i = threadIdx.x; i < kRows * kWordsPerRow; i += kThreads) {
      const int r = i / kWordsPerRow;
      const int word = i % kWordsPerRow;
      const bool valid = t0 + r < p.rows;
      const bf16* src = valid ? latent_head + (t0 + r) * p.latent_row_stride + word * 8 : p.latent;
      device::CopyAsync16(rows_smem + r * kSmemRow + word * 8, src, valid);
    }
  }

  // This thread's outputs: rows group and group + 8 of each tile, columns 2q, 2q+1 of the warp's.
  // Their gate words and lengths are loaded without branches (rows past the end read the last
  // row, whose result is not stored) and first used in the epilogue, so that all of them are in
  // flight together: loads under `if (t < rows)` would each be waited for inside their branch,
  // one memory round trip per half.
  const int out_column = head * kValueDim + column + 2 * quarter;
  uint32_t gate_word[kRowTiles][kHalves];
  int32_t length[kRowTiles][kHalves];
#pragma unroll
  for (int tile = 0; tile < kRowTiles; ++tile) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int t = min(t0 + tile * 16 + group + 8 * half, p.rows - 1);
      gate_word[tile][half] =
          *reinterpret_cast<const uint32_t*>(p.gate + t * p.gate_row_stride + out_column);
      length[tile][half] = p.lengths[t / p.q];
    }
  }

  // All of this grid's upstream-written inputs are in flight or loaded: the next kernel may start.
  device::LaunchDependents();
  if constexpr (!kDirect) {
    device::CopyAsyncCommitAndWaitAll();
    __syncthreads();
    MLA_TIMELINE_STAMP(2);
  } else {
    MLA_TIMELINE_STAMP_AFTER(2, a_rows[0].x ^ a_rows[kChunks - 1].w);
  }

  // Accumulator chains: one per MMA of a chunk, and with 8 rows one per chunk parity as well:
  // there nothing else runs beside the MMAs to hide their latency (with shared-memory reads in
  // the loop, four chains measured no faster with one row tile and slower with two).
  constexpr int kParities = kDirect ? 2 : 1;
  float acc[kRowTiles][kParities][2][4] = {};
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int tile = 0; tile < kRowTiles; ++tile) {
      uint4 x, y;
      if constexpr (kDirect) {
        x = a_rows[c];
        y = make_uint4(0, 0, 0, 0);  // rows 8-15
      } else {
        const bf16* row_lo = rows_smem + (tile * 16 + group) * kSmemRow + 32 * c + 8 * quarter;
        x = *reinterpret_cast<const uint4*>(row_lo);
        y = *reinterpret_cast<const uint4*>(row_lo + 8 * kSmemRow);
      }
      float(&chain)[2][4] = acc[tile][c % kParities];
      device::MmaBf16(chain[0], x.x, y.x, x.y, y.y, w_fragment[c].x, w_fragment[c].y);
      device::MmaBf16(chain[1], x.z, y.z, x.w, y.w, w_fragment[c].z, w_fragment[c].w);
    }
  }

  // Pair (tile, half): accumulator e of the m16n8 tile is row group (+8 for e >= 2), column
  // 2q + (e & 1).
  const auto sum = [&](int tile, int e) {
    float s0 = acc[tile][0][0][e];
    float s1 = acc[tile][0][1][e];
#pragma unroll
    for (int parity = 1; parity < kParities; ++parity) {
      s0 += acc[tile][parity][0][e];
      s1 += acc[tile][parity][1][e];
    }
    return s0 + s1;
  };
  MLA_TIMELINE_STAMP_AFTER(10, __float_as_uint(acc[0][0][0][0] + acc[0][kParities - 1][1][0]));
  constexpr int kPairs = kRowTiles * kHalves;
  float v[2 * kPairs];
  uint32_t gates[kPairs];
  bool active[kPairs];
  uint32_t out[kPairs];
#pragma unroll
  for (int tile = 0; tile < kRowTiles; ++tile) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int i = kHalves * tile + half;
      v[2 * i] = __bfloat162float(__float2bfloat16_rn(sum(tile, 2 * half)));
      v[2 * i + 1] = __bfloat162float(__float2bfloat16_rn(sum(tile, 2 * half + 1)));
      gates[i] = gate_word[tile][half];
      active[i] = length[tile][half] > 0;
    }
  }
  device::GatePairs(v, gates, active, out);
  MLA_TIMELINE_STAMP_AFTER(11, out[0] ^ out[kPairs - 1]);
#pragma unroll
  for (int tile = 0; tile < kRowTiles; ++tile) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int t = t0 + tile * 16 + group + 8 * half;
      if (t >= p.rows) continue;
      *reinterpret_cast<uint32_t*>(p.output + t * p.output_row_stride + out_column) =
          out[kHalves * tile + half];
    }
  }
  MLA_TIMELINE_STAMP(12);
}

template <int kTileRows>
__global__ void __launch_bounds__(kThreads) ColumnSplitKernel(const FusedTailParams p) {
  ColumnSplitBlock<kTileRows>(p);
}

// 8 rows: held to 144 registers a thread, so that three blocks still fit beside an upstream
// kernel's (docs/design.md). The timeline probe's stamps take more (168 still fit three).
#ifndef MLA_VALUE_DIRECT_MAX_REGISTERS
#define MLA_VALUE_DIRECT_MAX_REGISTERS 144
#endif
__global__ void __maxnreg__(MLA_VALUE_DIRECT_MAX_REGISTERS)
    ColumnSplitDirectKernel(const FusedTailParams p) {
  ColumnSplitBlock<8>(p);
}

template <int kTileRows>
constexpr void (*KernelOf())(const FusedTailParams) {
  if constexpr (kTileRows == 8) {
    return ColumnSplitDirectKernel;
  } else {
    return ColumnSplitKernel<kTileRows>;
  }
}

template <int kTileRows>
KernelLaunch LaunchOf(int heads, int rows) {
  static_assert(SmemBytes<kTileRows>() <= 48 * 1024, "more shared memory needs an opt-in");
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(KernelOf<kTileRows>());
  launch.grid = dim3(kValueDim / kColumnsPerBlock, heads, (rows + kTileRows - 1) / kTileRows);
  launch.block = dim3(kThreads);
  launch.smem_bytes = SmemBytes<kTileRows>();
  return launch;
}

}  // namespace

int ColumnSplitBlockRows(int heads, int rows, int multiprocessors) {
  const int blocks_per_row_block = (kValueDim / kColumnsPerBlock) * heads;
  // 8 rows (the measurements behind both cases: docs/design.md):
  // - up to 8 rows while the grid fits the multiprocessors at the three blocks a multiprocessor
  //   their registers allow (132 on an H200: up to 99 heads); past that they take two waves;
  // - at 9-32 rows, ceil(rows / 8) a column block, each reading W_UV, while the grid has at most
  //   one block a multiprocessor (up to 16 heads at 16 rows, 8 at 32).
  static_assert(kValueDim / kColumnsPerBlock == 4, "EightRowBlocksFitOneWave counts 4 a head");
  if (rows <= 8 && blocks_per_row_block <= 3 * multiprocessors) return 8;
  if (EightRowBlocksFitOneWave(heads, rows, multiprocessors)) return 8;
  // 32 while the grid still has about two blocks per multiprocessor. 64 rows (69 KB of shared
  // memory a block) measured 2-3x slower per row on the H200, and such batches take other
  // kernels anyway.
  return rows >= 32 && blocks_per_row_block * (rows / 32) >= 264 ? 32 : 16;
}

cudaError_t LoadColumnSplit() {
  cudaError_t e = LoadKernel(KernelOf<8>(), SmemBytes<8>());
  if (e == cudaSuccess) e = LoadKernel(KernelOf<16>(), SmemBytes<16>());
  return e != cudaSuccess ? e : LoadKernel(KernelOf<32>(), SmemBytes<32>());
}

KernelLaunch PlanColumnSplit(int heads, int rows, int multiprocessors) {
  switch (ColumnSplitBlockRows(heads, rows, multiprocessors)) {
    case 8:
      return LaunchOf<8>(heads, rows);
    case 16:
      return LaunchOf<16>(heads, rows);
    default:
      return LaunchOf<32>(heads, rows);
  }
}

}  // namespace mla_tail::internal

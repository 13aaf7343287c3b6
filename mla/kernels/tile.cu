// Tile: the fused W_UV projection and sigmoid gate on Hopper's warpgroup MMA.
//
// A block computes one tile of (kCols output columns, head, 64 rows) with one warpgroup, or two
// that split its columns: one wgmma m64nNk16 (N = the warpgroup's columns) per 16 latent values,
// both operands read by the tensor cores from shared memory. It serves the grid between the
// smallest batches, where ColumnSplit (column_split.cu) would re-read W_UV for every 16-32 rows,
// and the largest, where the warp-specialized persistent kernel (persistent_128x128.cu) shares each
// W_UV slice between 128 rows. The configurations (kWgConfigs, below):
//   - all 8 steps in flight at once, 64 x 32 tiles (two blocks a multiprocessor) or 64 x 64
//     (one): one memory round trip, for grids smaller than the GPU;
//   - a 6-stage 64 x 64 pipeline (two blocks a multiprocessor: the next tail's blocks join while
//     this one drains) or a 4-stage one (three);
//   - 64 x 128 tiles: each latent row is read once, not once for each 64-column half; two
//     warpgroups of 64 columns each, a 4-stage pipeline (two blocks a multiprocessor).
//
// K: the latent values in steps of 64 (128 bytes a row, one 128-byte swizzle atom). Each step's
// W_UV slice [kCols][64] and latent slice [kRows][64] are copied by every thread with cp.async
// into one of kStages buffers: either a pipeline (kStages - 1 steps in flight while one is
// computed), or all 8 steps at once (one memory round trip; a block a multiprocessor, for grids
// smaller than the GPU), whose MMAs then run on while the next step's copies are waited for:
// no buffer is reused (with a pipeline, that overlap would cost a step in flight, which measured
// slower). The first tile's W_UV copies are issued before the dependency wait: no upstream
// kernel writes weights (its latent, gate and lengths only get an L2 prefetch hint,
// prefetch.cuh). Latent rows at and past the live row count (read after the wait) are not
// copied, unless rows past it are readable: their products land in output rows never stored. Every
// copy's address is computed before the dependency wait (TileSources): after it a block only issues
// copies, one cp.async from a register and a constant offset each (a latent or gate row's tested
// against the live row count), since one warp a scheduler issues everything a block does after the
// wait (docs/benchmarks.md). The 4-stage 64 x 64 pipeline keeps computing them at each copy.
//
// Shared operand layout: the canonical K-major 128-byte swizzle of wgmma. Row r of a tile is
// 128 bytes at r * 128; its 16-byte word w is stored at word w ^ (r % 8). Tiles start on
// 1024-byte boundaries; 8-row groups are 1024 bytes apart (the descriptor's stride).
//
// Epilogue: a tile's gate arrives in shared memory with its first copies, and each thread's two
// rows' lengths in its registers (in shared memory beside the gate for the 4-stage pipeline).
// Each thread rounds its sums to bf16, applies the gate, and writes the result over the gate
// word it read (its own word: no other thread touches it); after a barrier the tile leaves in
// 16-byte stores, whole rows at a time. The 4-stage pipeline computes the gate's sigmoids during
// the K steps instead (EarlySigmoids, where it measured faster), the others in the epilogue.
//
// e4m3 W_UV (fp8.cuh, tile_copy.cuh): each step's slice is copied as e4m3 into its stage buffer's
// W_UV area and, once this thread's copies of the step have landed, dequantized in place into the
// bf16 swizzled layout by the thread that copied it, before the barrier that publishes the step
// to the MMAs; the head's 4 block scales are loaded before the dependency wait. In the
// all-in-flight tiles and the 6-stage ring the prologue's steps (all 8, or 5) are dequantized
// before the wait, their copies awaited there.
//
// e4m3 output: the store phase reads the gated bf16 tile as before; a row's amax over the tile's
// columns is a shuffle over the lanes that hold the row, and with tiles narrower than a head
// (32 or 64 columns) the head's column blocks are one cluster (TileE4m3OutputKernel; they share
// their rows, so they run or leave together): each block pushes its rows' amax into every block's
// area for it (WgTile::RowAmax, after the gate tile), and once its own area is complete reads
// the rows' amax locally, as ColumnSplit does. A lane quantizes 2-4 words of a row (fp8.cuh,
// GatedRowWords).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

#include "mla/kernels/device.cuh"
#include "mla/kernels/early_sigmoids.cuh"
#include "mla/kernels/fp8.cuh"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/sm90.h"
#include "mla/kernels/tile_copy.cuh"
#include "mla/kernels/timeline_stamps.cuh"
#include "mla/kernels/wgmma.cuh"

namespace mla_tail::internal {
namespace {

// A 64-row tile (wgmma's m) of kCols columns; its stage buffers and gate tile: tile_copy.cuh.
// kLengthsInSmem: the rows' lengths come to shared memory beside the gate tile (EarlySigmoids
// reads them there); otherwise each thread loads its own two rows' lengths into registers
// (RowLengths).
template <int kStages, int kCols, int kWarpgroups, bool kSmemLengths, bool kE4m3Output>
struct WgTile : device::TileLayout<128 * kWarpgroups, 64, kCols> {
  using L = device::TileLayout<128 * kWarpgroups, 64, kCols>;
  static constexpr bool kLengthsInSmem = kSmemLengths;
  using L::kRows;
  using L::kSteps;
  // Each warpgroup computes kWgCols of the tile's columns; all threads copy.
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kWgCols = kCols / kWarpgroups;
  // With a buffer for every step, the prologue issues them all; otherwise kStages - 1 steps
  // fly while one is computed.
  static constexpr bool kAllInFlight = kStages == kSteps;
  static constexpr int kPrologueSteps = kAllInFlight ? kSteps : kStages - 1;
  // The epilogue's inputs: the gate tile, then the rows' lengths (kLengthsInSmem).
  static constexpr int kGateOffset = kStages * L::kStageBytes;
  static constexpr int kLengthsOffset = kGateOffset + kRows * L::kGateRowBytes;
  // The e4m3 output of a head split over a cluster: each row's amax from every block of it
  // (device::ClusterRowAmax), in an area of its own, which the other blocks write into while
  // this one may still be computing.
  static constexpr int kClusterBlocks = kValueDim / kCols;
  static constexpr bool kPushesAmax = kE4m3Output && kClusterBlocks > 1;
  using RowAmax = device::ClusterRowAmax<kClusterBlocks, 1, kRows>;
  static constexpr int kAmaxOffset =
      kLengthsOffset + (kLengthsInSmem ? kRows * static_cast<int>(sizeof(int32_t)) : 0);
  static constexpr size_t kSmemBytes =
      kAmaxOffset + (kPushesAmax ? sizeof(RowAmax) : 0) + L::kAlign;

  static_assert(kWgCols == 16 || kWgCols == 32 || kWgCols == 64 || kWgCols == 128,
                "wgmma's n: a warpgroup's columns");
  static_assert(kStages >= 2 && kStages <= kSteps, "pipeline depth: at most one buffer a step");
  static_assert(kSmemBytes <= kSharedMemoryPerBlock, "shared memory of one block");
  static_assert(kAmaxOffset % alignof(RowAmax) == 0, "the amax area aligned");
  static_assert(L::kCopyThreads >= kRows, "a thread a row's length");
  // A thread's gate rows are kGateRowsPerPass apart: one swizzle phase, so one offset each.
  static_assert(L::kGateRowsPerPass % (L::kGateRowsPerLine * L::kGateSwizzle) == 0,
                "a thread's gate words at one swizzled offset");
};

// One thread's share of a tile's copies (the words device::TileCopier assigns it) with every
// address computed once, before the dependency wait, into registers: after the wait each copy is
// one cp.async from a base register and a constant offset, the latent and gate rows' only tested
// against the live row count. Computed at each copy, with the parameters read again after every
// cp.async (its memory clobber), the copies issued after the wait took about 13 instructions
// each (docs/benchmarks.md, "What bounds the tensor-parallel shapes"). Without a gate (kGated
// false) it copies none; with e4m3 W_UV (kW) it stages each W_UV word for device::E4m3Slice,
// which the copying thread dequantizes in place (device::TileCopier::DequantizeW).
template <typename L, bool kGated, WeightType kW>
struct TileSources {
  using WElement = std::conditional_t<kW == WeightType::kE4m3, fp8_e4m3, bf16>;
  using E4m3 = device::E4m3SliceFor<L::kCols, L::kCopyThreads>;
  // A thread's W_UV words: word threadIdx.x % kWWords of rows threadIdx.x / kWWords + n *
  // kWRowsPerPass (an e4m3 row has 4 16-byte words or 8 8-byte ones, a bf16 row 8 16-byte ones).
  static constexpr int kWWords = kW == WeightType::kE4m3 ? E4m3::kWordsPerRow : L::kWords;
  static constexpr int kWWordBytes = kW == WeightType::kE4m3 ? E4m3::kBytesPerWord : 16;
  static constexpr int kWRowsPerPass = L::kCopyThreads / kWWords;
  static constexpr int kWCopies = L::kCols / kWRowsPerPass;
  static_assert(kWRowsPerPass % 8 == 0 && L::kCols % kWRowsPerPass == 0, "one swizzle phase");
  static_assert(kW == WeightType::kBf16 || (L::kCols - 1) * E4m3::kRowBytes +
                                                   2 * kWWordBytes * (E4m3::kWordsPerRow - 1) +
                                                   kWWordBytes <=
                                               L::kWBytes,
                "e4m3 W_UV staged within the stage's bf16 W_UV area");

  const WElement* w;                     // its first W_UV row of the tile, its word, step 0
  int64_t w_pass;                        // elements between its W_UV rows
  const bf16* latent[L::kLatentCopies];  // its latent rows, step 0
  const bf16* gate[L::kGateCopies];      // its gate words (rows past the end: not read)
  int latent_t;                          // the row of the tail of its first latent row
  int gate_t;                            // and of its first gate row
  uint32_t dst;                          // shared address of its word in stage 0's latent rows
  uint32_t w_dst;                        // and of its first W_UV word (staged, with e4m3)
  uint32_t gate_dst;                     // and of its first word in the gate tile

  __device__ __forceinline__ TileSources(const FusedTailParams& p, const device::TileAt& c,
                                         uint32_t smem_base) {
    const int row = threadIdx.x / L::kWords;
    const int word = threadIdx.x % L::kWords;
    dst = smem_base + row * L::kRowBytes + 16 * (word ^ (row % 8));
    if constexpr (kW == WeightType::kE4m3) {
      const int w_row = threadIdx.x / kWWords;
      const int w_word = threadIdx.x % kWWords;
      w_dst = smem_base + E4m3::Staged(w_row, w_word);
      w = p.w_uv_fp8 + c.head * p.w_head_stride + (c.column0 + w_row) * p.w_row_stride +
          kWWordBytes * w_word;
    } else {
      w_dst = dst;
      w = p.w_uv + c.head * p.w_head_stride + (c.column0 + row) * p.w_row_stride + 8 * word;
    }
    w_pass = kWRowsPerPass * p.w_row_stride;
    latent_t = c.t0 + row;
#pragma unroll
    for (int n = 0; n < L::kLatentCopies; ++n) {
      const int t = latent_t + n * L::kRowsPerPass;
      latent[n] = p.latent + t * p.latent_row_stride + c.head * kLatentDim + 8 * word;
    }
    if constexpr (kGated) {
      const int gate_row = threadIdx.x / L::kGateWordsPerRow;
      const int gate_word = threadIdx.x % L::kGateWordsPerRow;
      gate_dst = smem_base + L::GateWord(gate_row, gate_word);
      gate_t = c.t0 + gate_row;
#pragma unroll
      for (int n = 0; n < L::kGateCopies; ++n) {
        const int t = gate_t + n * L::kGateRowsPerPass;
        gate[n] = t < p.rows ? p.gate + t * p.gate_row_stride + c.head * kValueDim + c.column0 +
                                   8 * gate_word
                             : p.gate;
      }
    }
  }

  // Step `step`'s W_UV words into stage buffer `stage` (both known once the step loop is
  // unrolled): bf16 in the swizzled layout, or e4m3 staged for E4m3Slice.
  __device__ __forceinline__ void W(int step, int stage) const {
#pragma unroll
    for (int n = 0; n < kWCopies; ++n) {
      const uint32_t to = w_dst + stage * L::kStageBytes + n * kWRowsPerPass * L::kRowBytes;
      if constexpr (kWWordBytes == 16) {
        device::CopyAsync16To(to, w + n * w_pass + step * L::kStepK, 16);
      } else {
        device::CopyAsync8To(to, w + n * w_pass + step * L::kStepK);
      }
    }
  }
  // Step `step`'s latent words into stage buffer `stage`. Rows at and past `rows` (the live rows)
  // are not copied: their products land in output rows never stored.
  __device__ __forceinline__ void Latent(int step, int stage, int rows) const {
#pragma unroll
    for (int n = 0; n < L::kLatentCopies; ++n) {
      if (latent_t + n * L::kRowsPerPass < rows) {
        device::CopyAsync16To(
            dst + stage * L::kStageBytes + L::kWBytes + n * L::kRowsPerPass * L::kRowBytes,
            latent[n] + step * L::kStepK, 16);
      }
    }
  }
  // The gate tile at `gate_offset` bytes past the stages' base (kGated); rows at and past `rows`
  // zero-filled.
  __device__ __forceinline__ void Gate(int gate_offset, int rows) const {
#pragma unroll
    for (int n = 0; kGated && n < L::kGateCopies; ++n) {
      device::CopyAsync16To(gate_dst + gate_offset + n * L::kGateRowsPerPass * L::kGateRowBytes,
                            gate[n], gate_t + n * L::kGateRowsPerPass < rows ? 16 : 0);
    }
  }
};

// What a configuration without TileSources or RowLengths holds in their place.
struct Nothing {
  template <typename... Args>
  __device__ __forceinline__ explicit Nothing(Args...) {}
};

// The lengths of a thread's rows (16 * warp + 8h + group of its warpgroup's 64, h = 0, 1), as the
// epilogue tests them: addresses before the dependency wait, loads right after it (they are used
// in the epilogue only). Rows at and past the live row count read none (length 0: they are not
// stored).
struct RowLengths {
  const int32_t* src[2];
  int t[2];
  int32_t length[2];

  __device__ __forceinline__ RowLengths(const FusedTailParams& p, int t0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      t[h] = t0 + 16 * (threadIdx.x % 128 / 32) + 8 * h + threadIdx.x % 32 / 4;
      src[h] = p.lengths + min(t[h], p.rows - 1) / p.q;
    }
  }
  __device__ __forceinline__ void Load(int rows) {
#pragma unroll
    for (int h = 0; h < 2; ++h) length[h] = t[h] < rows ? *src[h] : 0;
  }
};

// cp.async.wait_group with a count known once the step loop is unrolled (at most 7: WgTile).
__device__ __forceinline__ void CopyAsyncWaitUntil(int pending) {
  switch (pending) {
    case 0:
      device::CopyAsyncWait<0>();
      break;
    case 1:
      device::CopyAsyncWait<1>();
      break;
    case 2:
      device::CopyAsyncWait<2>();
      break;
    case 3:
      device::CopyAsyncWait<3>();
      break;
    case 4:
      device::CopyAsyncWait<4>();
      break;
    case 5:
      device::CopyAsyncWait<5>();
      break;
    case 6:
      device::CopyAsyncWait<6>();
      break;
    default:
      device::CopyAsyncWait<7>();
      break;
  }
}

// The gate's sigmoids (docs/spec.md's s) computed during the K steps, a few pairs a step while
// that step's MMAs run and later steps' copies fly, so that the epilogue only multiplies and
// rounds. Only the 4-stage pipeline gains from it; in the others a step's few sigmoids lengthen
// the chain of MMAs once the copies have landed (docs/design.md). With kEnabled false: nothing,
// and the epilogue computes them.
template <typename T, bool kEnabled>
struct EarlySigmoids {
  __device__ __forceinline__ void Step(int, const uint8_t*, const int32_t*) {}
};

template <typename T>
struct EarlySigmoids<T, true> {
  // Accumulator 4j + e of the m64 x kCols tile: row 16 * warp + group (+8 for e >= 2), column
  // 8j + 2 * quarter + (e & 1).
  struct Layout {
    static __device__ __forceinline__ int Row(int n) {
      return 16 * (threadIdx.x / 32) + 8 * (n % 2) + threadIdx.x % 32 / 4;
    }
    static __device__ __forceinline__ int GateOffset(int n) {
      return T::GateWord(Row(n), n / 2) + 4 * (threadIdx.x % 4);
    }
  };
  static constexpr int kPairs = 2 * T::kGateWordsPerRow;  // 2 halves x kCols / 8
  static constexpr int kPairsPerStep = kPairs / T::kSteps;
  static_assert(kPairs % T::kSteps == 0, "the same number of pairs every step");
  device::EarlySigmoidPairs<Layout, kPairs> pairs;

  // Step `step`'s pairs; the gate tile and lengths are in shared memory (they came with step 0).
  __device__ __forceinline__ void Step(int step, const uint8_t* gate_tile, const int32_t* lengths) {
    pairs.Compute(step * kPairsPerStep, (step + 1) * kPairsPerStep, gate_tile, lengths);
  }
  __device__ __forceinline__ void Gate(const float* acc, uint8_t* gate_tile,
                                       const int32_t* lengths) {
    pairs.Gate(acc, gate_tile, lengths);
  }
};

// kGated false: the tail without a gate (out = bf16(v)), which loads none. kLeanCopies: the
// copies' addresses from TileSources, the lengths from RowLengths, and with one warpgroup
// warp-uniform descriptors; otherwise each copy's address computed at the copy
// (device::TileCopier) and the lengths in shared memory: the 4-stage pipeline's code, kept as
// measured (with TileSources its 64-row grids of three blocks a multiprocessor ran 1-3% slower
// at 12 x 1024 and 96 x 128; docs/benchmarks.md).
template <int kStages, int kCols, int kWarpgroups, bool kEarlySigmoids, bool kLeanCopies,
          bool kGated, WeightType kW, OutputType kO>
__device__ __forceinline__ void TileBlock(const FusedTailParams& p) {
  using T = WgTile<kStages, kCols, kWarpgroups, !kLeanCopies, kO == OutputType::kE4m3>;
  constexpr int kRows = T::kRows;
  constexpr int kWgCols = T::kWgCols;
  constexpr int kSteps = T::kSteps;
  constexpr int kAlign = T::kAlign;
  static_assert(!kEarlySigmoids || kWarpgroups == 1, "EarlySigmoids: one warpgroup's layout");
  static_assert(kGated || !kEarlySigmoids, "early sigmoids need a gate");
  static_assert(!kEarlySigmoids || !kLeanCopies,
                "EarlySigmoids reads the lengths from shared memory");
  extern __shared__ uint4 smem_words[];
  // The swizzle is a function of the address: align the tiles to its 1024-byte atom.
  const uint32_t smem_raw = device::SmemAddress(smem_words);
  const uint32_t smem_base = (smem_raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);
  if constexpr (T::kPushesAmax) {
    reinterpret_cast<typename T::RowAmax*>(smem + T::kAmaxOffset)->Start();
  }

  using Tile = device::TileAt;
  const Tile tile{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x) * kCols,
                  static_cast<int>(blockIdx.z) * kRows};

  // Step `step` into stage buffer `stage`, and the epilogue's inputs: with kLeanCopies, every
  // address computed here, before the dependency wait.
  using Sources = std::conditional_t<kLeanCopies, TileSources<typename T::L, kGated, kW>, Nothing>;
  using Copier = device::TileCopier<typename T::L, true, kW>;
  const Sources sources(p, tile, smem_base);
  const std::conditional_t<kLeanCopies, Nothing, Copier> copier(p);
  int read_rows = p.rows;  // the rows its copies may touch, once known (after the wait)
  auto copy_w = [&](int step, int stage) {
    if constexpr (kLeanCopies) {
      sources.W(step, stage);
    } else {
      copier.W(p, smem, tile, step, stage);
    }
  };
  auto copy_latent = [&](int step, int stage) {
    if constexpr (kLeanCopies) {
      sources.Latent(step, stage, read_rows);
    } else {
      copier.Latent(p, read_rows, smem, tile, step, stage);
    }
  };
  uint8_t* const gate_tile = smem + T::kGateOffset;
  auto copy_epilogue_inputs = [&]() {
    if constexpr (kLeanCopies) {
      sources.Gate(T::kGateOffset, read_rows);
    } else {
      copier.template EpilogueInputs<kGated>(p, read_rows, tile, gate_tile,
                                             smem + T::kLengthsOffset);
    }
  };
  std::conditional_t<kLeanCopies, RowLengths, Nothing> lengths(p, tile.t0);

  MLA_TIMELINE_STAMP(0);
  // The early count clamped before the wait with a gate, after it without one (device.cuh).
  const auto early_count = [&] {
    if constexpr (kGated) {
      return device::LiveRowsPinned(p.row_count, p.row_count_early, p.rows);
    } else {
      return device::EarlyCountPinned(p.row_count, p.row_count_early);
    }
  }();
  // Prologue: groups 0..kPrologueSteps-1 hold steps 0..kPrologueSteps-1; group 0 also the
  // epilogue's inputs.
#pragma unroll
  for (int step = 0; step < T::kPrologueSteps; ++step) copy_w(step, step);
  const float4 scales = device::LoadBlockScales<kW>(p, tile.head);
  device::PrefetchBlockInputsL2<kGated>(p, tile.head, tile.t0, kRows, 0, kLatentDim, tile.column0,
                                        kCols);
  // e4m3 W_UV in the all-in-flight tiles and the 6-stage ring: the prologue steps' slices land and
  // are dequantized before the wait (no upstream kernel writes weights), in a group of their own,
  // complete before any other is committed, so the waits below count as before. The 4-stage
  // rings keep dequantizing each step after its copies: there this measured mixed, slower where
  // the rule runs the 64 x 128 tiles (docs/design.md).
  constexpr bool kDequantizeBeforeWait = kW == WeightType::kE4m3 && kStages >= 6;
  if constexpr (kDequantizeBeforeWait) {
    device::CopyAsyncCommit();
    device::CopyAsyncWait<0>();
#pragma unroll
    for (int step = 0; step < T::kPrologueSteps; ++step) {
      Copier::DequantizeW(smem, step, step, scales);
    }
  }
  device::GridDependencyWait();
  MLA_TIMELINE_STAMP(1);
  // Rows at and past the live count are neither read nor written, except that rows below
  // read_rows may be read where rows past the count are readable; a block of none of them exits
  // once its W_UV copies have landed.
  read_rows =
      device::ReadRowsAfterWait(p.row_count, early_count, p.rows_past_count_readable, p.rows);
  if (tile.t0 >= read_rows) {
    device::CopyAsyncCommitAndWaitAll();
    return;
  }
  // The rows stored. Where rows past the count are readable, the count is loaded here and first
  // used at the stores: the block computes all its rows, as without a count. The all-in-flight
  // tiles clamp it there (clamped here, their warps waited for it before issuing their copies:
  // 0.2 us at 12 x 64); the rings clamp it here (clamped at the stores, the 6-stage ring took
  // up to 1.10x the time without a count, from a different schedule of its prologue).
  const int rows_as_loaded =
      T::kAllInFlight ? device::LiveRowsAsLoaded(p.row_count, p.row_count_early,
                                                 p.rows_past_count_readable, read_rows)
                      : device::LiveRowsAfterWait(p.row_count, p.row_count_early,
                                                  p.rows_past_count_readable, p.rows, read_rows);
  if constexpr (kLeanCopies) lengths.Load(read_rows);
#pragma unroll
  for (int step = 0; step < T::kPrologueSteps; ++step) {
    copy_latent(step, step);
    if (step == 0) copy_epilogue_inputs();
    device::CopyAsyncCommit();
  }
  // Every read of upstream-written data is in flight once the last step's copies are issued:
  // dependents may launch (their prologues would compete with these copies before that).
  if (T::kAllInFlight) device::LaunchDependents();

  // Warpgroup wg multiplies by W_UV rows (output columns) [wg, wg + 1) * kWgCols of the slice
  // (with one warpgroup, a constant: the descriptors stay warp-uniform values).
  const int wg_index = threadIdx.x / 128;
  const int wg = kLeanCopies && kWarpgroups == 1 ? 0 : wg_index;
  const uint64_t a_desc0 = device::SmemDescriptor(smem_base + T::kWBytes);
  const uint64_t b_desc0 = device::SmemDescriptor(smem_base + wg * kWgCols * T::kRowBytes);

  float acc[kWgCols / 2];
#pragma unroll
  for (int j = 0; j < kWgCols / 2; ++j) acc[j] = 0.0f;
  EarlySigmoids<T, kEarlySigmoids> early;

#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    const int stage = step % kStages;
    // Groups 0..step are complete; the barrier publishes every thread's copies and tells
    // that every thread finished step - 1's MMAs, whose buffer the copies issued next
    // overwrite.
    if (T::kAllInFlight) {
      CopyAsyncWaitUntil(kSteps - 1 - step);
    } else {
      device::CopyAsyncWait<T::kPrologueSteps - 1>();
    }
    if (!kDequantizeBeforeWait || step >= T::kPrologueSteps) {
      Copier::DequantizeW(smem, step, stage, scales);  // e4m3 W_UV: this thread's words of the step
    }
    device::FenceProxyAsyncShared();
    __syncthreads();
    MLA_TIMELINE_STAMP(2 + step);
    if (!T::kAllInFlight) {
      const int next = step + T::kPrologueSteps;
      const int next_stage = (stage + T::kPrologueSteps) % kStages;
      if (next < kSteps) {
        copy_w(next, next_stage);
        copy_latent(next, next_stage);
        if (next == kSteps - 1) device::LaunchDependents();
      }
      device::CopyAsyncCommit();  // empty near the end: keeps one group per step
    }

    // Descriptor addresses are in 16-byte units: a stage is kStageBytes / 16 on, and each k16
    // slice of the 128-byte rows 32 bytes (2) on.
    const uint64_t stage_offset = static_cast<uint64_t>(stage * T::kStageBytes) >> 4;
    device::FenceAccumulators(acc);
    device::WgmmaFence();
#pragma unroll
    for (int k = 0; k < T::kStepK / 16; ++k) {
      device::Wgmma64xN(acc, a_desc0 + stage_offset + 2 * k, b_desc0 + stage_offset + 2 * k);
    }
    device::WgmmaCommit();
    // The gate tile landed with step 0 (group 0), and the barrier above published it.
    early.Step(step, gate_tile, reinterpret_cast<const int32_t*>(smem + T::kLengthsOffset));
    if (T::kAllInFlight && step + 1 < kSteps) {
      device::WgmmaWait<1>();  // step - 1's MMAs are done; this step's run on (no reuse)
    } else {
      device::WgmmaWait<0>();
    }
    device::FenceAccumulators(acc);
  }
  MLA_TIMELINE_STAMP(2 + kSteps);

  if constexpr (kEarlySigmoids) {
    early.Gate(acc, gate_tile, reinterpret_cast<const int32_t*>(smem + T::kLengthsOffset));
  } else {
    // Accumulator 4j + e of the warpgroup's m64 x kWgCols tile: row 16 * warp + group (+8 for
    // e >= 2), column 8j + 2 * quarter + (e & 1); gate word j of the warpgroup's columns is
    // word wg * kOutTiles + j of the tile's.
    constexpr int kOutTiles = kWgCols / 8;
    const float* out = acc;
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x % 128 / 32;
    const int word0 = wg * kOutTiles;
    const int group = lane / 4;
    const int quarter = lane % 4;
    const int32_t* smem_lengths = reinterpret_cast<const int32_t*>(smem + T::kLengthsOffset);
    // Pair kOutTiles * half + j, gated a batch of halves at once (both for 64 columns; one at a
    // time for 128, which keeps 32 pairs in registers beside the accumulators, not 64), then
    // written over the gate words read.
    constexpr int kHalvesPerBatch = kOutTiles <= 8 ? 2 : 1;
    constexpr int kPairs = kHalvesPerBatch * kOutTiles;
#pragma unroll
    for (int half0 = 0; half0 < 2; half0 += kHalvesPerBatch) {
      float v[2 * kPairs];
      uint32_t gates[kPairs];
      bool active[kPairs];
      uint32_t gated[kPairs];
#pragma unroll
      for (int b = 0; b < kHalvesPerBatch; ++b) {
        const int half = half0 + b;
        const int row = 16 * warp + 8 * half + group;
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          const int n = kOutTiles * b + j;
          v[2 * n] = __bfloat162float(__float2bfloat16_rn(out[4 * j + 2 * half]));
          v[2 * n + 1] = __bfloat162float(__float2bfloat16_rn(out[4 * j + 2 * half + 1]));
          gates[n] = *reinterpret_cast<const uint32_t*>(gate_tile + T::GateWord(row, word0 + j) +
                                                        4 * quarter);
          if constexpr (kLeanCopies) {
            active[n] = lengths.length[half] > 0;
          } else {
            active[n] = smem_lengths[row] > 0;
          }
        }
      }
      device::EpiloguePairs<kGated>(v, gates, active, gated);
#pragma unroll
      for (int b = 0; b < kHalvesPerBatch; ++b) {
        const int row = 16 * warp + 8 * (half0 + b) + group;
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          *reinterpret_cast<uint32_t*>(gate_tile + T::GateWord(row, word0 + j) + 4 * quarter) =
              gated[kOutTiles * b + j];
        }
      }
    }
  }
  __syncthreads();
  MLA_TIMELINE_STAMP(3 + kSteps);
  const int rows = T::kAllInFlight ? device::ClampRows(rows_as_loaded, p.rows) : rows_as_loaded;
  // The output tile, 16 bytes a thread and copy: word w of row r.
  if constexpr (kO == OutputType::kBf16) {
#pragma unroll
    for (int n = 0; n < T::kGateCopies; ++n) {
      const int r = threadIdx.x / T::kGateWordsPerRow + n * T::kGateRowsPerPass;
      const int word = threadIdx.x % T::kGateWordsPerRow;
      const int t = tile.t0 + r;
      if (t >= rows) continue;
      *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + tile.head * kValueDim +
                                tile.column0 + 8 * word) =
          *reinterpret_cast<const uint4*>(gate_tile + T::GateWord(r, word));
    }
  } else {
    // A row's words split over kLanes consecutive lanes, 4 words each where the tile has 64
    // columns or more (fp8.cuh, GatedRowWords): one pass over the tile.
    constexpr int kWords = T::kGateWordsPerRow * kRows / T::kCopyThreads < 4
                               ? T::kGateWordsPerRow * kRows / T::kCopyThreads
                               : 4;
    using Words = device::GatedRowWords<T, kWords>;
    constexpr int kRowsPerPass = T::kCopyThreads / Words::kLanes;
    constexpr int kPasses = kRows / kRowsPerPass;
    static_assert(kPasses * kRowsPerPass == kRows, "every lane has whole chunks of rows");
    typename T::RowAmax& amax = *reinterpret_cast<typename T::RowAmax*>(smem + T::kAmaxOffset);
    if constexpr (T::kPushesAmax) amax.AwaitStarts();
    const int lane = threadIdx.x % 32;
    const int part = lane % Words::kLanes;
    const int warp_row = Words::kRowsPerWarp * (threadIdx.x / 32) + Words::RowInWarp(lane);
    Words words[kPasses];
    uint32_t m[kPasses];
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      const int r = warp_row + n * kRowsPerPass;
      words[n].Load(gate_tile, r, part);
      m[n] = device::GroupMax<Words::kLanes>(words[n].MagnitudeMax());
      if constexpr (T::kPushesAmax) {
        if (part == 0) amax.Publish(r, 0, m[n]);
      }
    }
    bool scale_writer = part == 0;
    if constexpr (T::kPushesAmax) {
      amax.Await();
      scale_writer = scale_writer && device::ClusterRank() == 0;
    }
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      const int r = warp_row + n * kRowsPerPass;
      const device::OutputScale scale = device::OutputScaleOf(T::kPushesAmax ? amax.Max(r) : m[n]);
      const int t = tile.t0 + r;
      if (t >= rows) continue;
      words[n].Store(p.output_fp8 + t * p.output_row_stride + tile.head * kValueDim + tile.column0,
                     part, scale);
      if (scale_writer) {
        p.output_scale[t * p.output_scale_row_stride + tile.head * p.output_scale_head_stride] =
            scale.scale;
      }
    }
  }
  MLA_TIMELINE_STAMP(4 + kSteps);
}

template <int kStages, int kCols, int kWarpgroups, int kMinBlocks, bool kEarlySigmoids,
          bool kLeanCopies, bool kGated, WeightType kW>
__global__ void __launch_bounds__(128 * kWarpgroups, kMinBlocks)
    TileKernel(const FusedTailParams p) {
  TileBlock<kStages, kCols, kWarpgroups, kEarlySigmoids, kLeanCopies, kGated, kW,
            OutputType::kBf16>(p);
}

// The e4m3 output: a head's column blocks (128 / kCols) in one cluster.
template <int kStages, int kCols, int kWarpgroups, int kMinBlocks, bool kEarlySigmoids,
          bool kLeanCopies, bool kGated, WeightType kW>
__global__ void __launch_bounds__(128 * kWarpgroups, kMinBlocks)
    __cluster_dims__(kValueDim / kCols, 1, 1) TileE4m3OutputKernel(const FusedTailParams p) {
  TileBlock<kStages, kCols, kWarpgroups, kEarlySigmoids, kLeanCopies, kGated, kW,
            OutputType::kE4m3>(p);
}

// The configurations FusedKernel names: stages (8: all steps in flight), the tile's
// columns, the warpgroups that split them, and the minimum blocks a multiprocessor its launch
// bounds name (0: none). The 64 x 128 tiles split their columns between two warpgroups, halving
// each thread's share of the epilogue; two of those blocks still share a multiprocessor (at most
// 128 registers a thread). A minimum of 1 lets the pipelines keep more registers (the 4-stage
// one 135 instead of 96). Why these and not their neighbours: docs/design.md. The shared memory
// of each (WgTile::kSmemBytes) decides how many of its blocks share a multiprocessor, which the
// rule (mla/dispatch.h) leans on.
struct WgConfig {
  FusedKernel kernel;
  int stages, cols, warpgroups, min_blocks;
  bool early_sigmoids;  // EarlySigmoids
  bool lean_copies;     // TileSources (TileKernel's kLeanCopies)
  // The warpgroups with e4m3 W_UV, [with the bf16 output, with the e4m3 output]. Each thread
  // dequantizes the words it copied, so two warpgroups convert a slice in half the instructions
  // a thread, with twice the warps a scheduler to cover their latency: 0.77-0.96x the time of one
  // in the all-in-flight 64 x 64 tiles, 0.87-0.99x in the 6-stage ring up to 96 heads, with the
  // e4m3 output 0.77-0.94x and 0.88-1.00x; in the 64 x 32 tiles (16 columns a warpgroup, 8-byte
  // e4m3 words: 32 rows of 64 values make 256) 0.76-0.90x with the bf16 output, but with the
  // e4m3 output 1.02-1.04x where its rule runs them (12 x 32-64), so there one (docs/design.md).
  int e4m3_warpgroups[2];
};
constexpr WgConfig kWgConfigs[] = {
    {FusedKernel::kTile64x64Pipeline4, 4, 64, 1, 1, true, false, {1, 1}},
    {FusedKernel::kTile64x64AllSteps, 8, 64, 1, 0, false, true, {2, 2}},
    {FusedKernel::kTile64x128, 4, 128, 2, 2, false, true, {2, 2}},
    {FusedKernel::kTile64x32AllSteps, 8, 32, 1, 0, false, true, {2, 1}},
    {FusedKernel::kTile64x64Pipeline6, 6, 64, 1, 1, false, true, {2, 2}},
};

// The rule (mla/dispatch.h) counts on how many blocks of each share a multiprocessor (sm90.h).
// With either output (the e4m3 output's amax area is at most 1 KB, none in the 64 x 128 tiles,
// which hold whole heads); e4m3 W_UV is staged within each stage's bf16 W_UV area.
template <int kStages, int kCols, int kWarpgroups, bool kSmemLengths>
constexpr bool BlocksOfBoth(size_t blocks) {
  return BlocksPerMultiprocessor(
             WgTile<kStages, kCols, kWarpgroups, kSmemLengths, false>::kSmemBytes) == blocks &&
         BlocksPerMultiprocessor(
             WgTile<kStages, kCols, kWarpgroups, kSmemLengths, true>::kSmemBytes) == blocks;
}
static_assert(BlocksOfBoth<8, 32, 1, false>(2), "Tile64x32AllSteps: two");
static_assert(BlocksOfBoth<8, 64, 1, false>(1), "Tile64x64AllSteps: one");
static_assert(BlocksOfBoth<6, 64, 1, false>(2), "Tile64x64Pipeline6: two");
static_assert(BlocksOfBoth<4, 64, 1, true>(3), "Tile64x64Pipeline4: three");
// Four stages fit two blocks a multiprocessor only with the lengths outside shared memory.
static_assert(BlocksOfBoth<4, 128, 2, false>(2), "Tile64x128: two");

template <int kIndex, WeightType kW, OutputType kO>
struct Wg {
  static constexpr WgConfig kC = kWgConfigs[kIndex];
  static constexpr int kWarpgroups =
      kW == WeightType::kE4m3 ? kC.e4m3_warpgroups[kO == OutputType::kE4m3] : kC.warpgroups;
  using T = WgTile<kC.stages, kC.cols, kWarpgroups, !kC.lean_copies, kO == OutputType::kE4m3>;
  static_assert(BlocksPerMultiprocessor(T::kSmemBytes) ==
                    BlocksPerMultiprocessor(WgTile<kC.stages, kC.cols, kC.warpgroups,
                                                   !kC.lean_copies, false>::kSmemBytes),
                "as many blocks a multiprocessor with either weight type (the rule counts them)");
  template <bool kEarly, bool kGated>
  static constexpr auto KernelOf() {
    if constexpr (kO == OutputType::kE4m3) {
      return TileE4m3OutputKernel<kC.stages, kC.cols, kWarpgroups, kC.min_blocks, kEarly,
                                  kC.lean_copies, kGated, kW>;
    } else {
      return TileKernel<kC.stages, kC.cols, kWarpgroups, kC.min_blocks, kEarly, kC.lean_copies,
                        kGated, kW>;
    }
  }
  static constexpr auto kKernel = KernelOf<kC.early_sigmoids, true>();
  // Without a gate: no sigmoids to compute early.
  static constexpr auto kUngatedKernel = KernelOf<false, false>();

  static KernelLaunch Plan(int heads, int rows, bool gated) {
    KernelLaunch launch;
    launch.function = gated ? reinterpret_cast<const void*>(kKernel)
                            : reinterpret_cast<const void*>(kUngatedKernel);
    launch.grid = dim3(kValueDim / kC.cols, heads, (rows + T::kRows - 1) / T::kRows);
    launch.block = dim3(T::kThreads);
    launch.smem_bytes = T::kSmemBytes;
    return launch;
  }
  static cudaError_t Load() {
    const cudaError_t e = LoadKernel(kKernel, T::kSmemBytes);
    return e != cudaSuccess ? e : LoadKernel(kUngatedKernel, T::kSmemBytes);
  }
};

// Calls f(Wg<i, kW, kO>) for the configuration of `kernel`; false if it has none.
template <WeightType kW, OutputType kO, typename F, int kIndex = 0>
bool WithConfig(FusedKernel kernel, F&& f) {
  if constexpr (kIndex == std::size(kWgConfigs)) {
    return false;
  } else {
    if (kWgConfigs[kIndex].kernel == kernel) {
      f(Wg<kIndex, kW, kO>());
      return true;
    }
    return WithConfig<kW, kO, F, kIndex + 1>(kernel, std::forward<F>(f));
  }
}

template <int kIndex = 0>
cudaError_t LoadAll() {
  if constexpr (kIndex == std::size(kWgConfigs)) {
    return cudaSuccess;
  } else {
    cudaError_t e = cudaSuccess;
    ForEachTypes([&](auto w, auto o) {
      if (e == cudaSuccess) e = Wg<kIndex, decltype(w)::value, decltype(o)::value>::Load();
    });
    return e != cudaSuccess ? e : LoadAll<kIndex + 1>();
  }
}

}  // namespace

bool IsTileKernel(FusedKernel kernel) {
  return WithConfig<WeightType::kBf16, OutputType::kBf16>(kernel, [](auto) {});
}

cudaError_t LoadTileKernels() { return LoadAll(); }

template <WeightType kW, OutputType kO>
cudaError_t PlanTile(int heads, int rows, FusedKernel kernel, bool gated, KernelLaunch* launch) {
  return WithConfig<kW, kO>(kernel,
                            [&](auto wg) { *launch = decltype(wg)::Plan(heads, rows, gated); })
             ? cudaSuccess
             : cudaErrorInvalidValue;
}
template cudaError_t PlanTile<WeightType::kBf16, OutputType::kBf16>(int, int, FusedKernel, bool,
                                                                    KernelLaunch*);
template cudaError_t PlanTile<WeightType::kE4m3, OutputType::kBf16>(int, int, FusedKernel, bool,
                                                                    KernelLaunch*);
template cudaError_t PlanTile<WeightType::kBf16, OutputType::kE4m3>(int, int, FusedKernel, bool,
                                                                    KernelLaunch*);
template cudaError_t PlanTile<WeightType::kE4m3, OutputType::kE4m3>(int, int, FusedKernel, bool,
                                                                    KernelLaunch*);

}  // namespace mla_tail::internal

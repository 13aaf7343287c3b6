// ColumnSplit: the fused W_UV projection and sigmoid gate.
//
// One 128-thread block per (32 output columns, head, 8, 16 or 32 rows); 64 columns with e4m3
// W_UV (below). Warp w owns columns 8w..8w+7 of the block's 32 over the whole latent: its W_UV
// B-fragments (16 x 16 bytes a thread) are loaded into registers before the dependency wait, since
// no upstream kernel writes weights (the block's latent, gate and lengths only get an L2 prefetch
// hint there, prefetch.cuh); then each thread loads its latent A-fragments into registers (8 rows)
// or the block stages its rows in padded shared memory (16 or 32), and runs m16n8k16 BF16 MMAs with
// FP32 accumulation: two chains per tile, four with 8 rows (below).
//
// k permutation: thread (group g, quarter p) loads latent indices 32c + 8p .. 32c + 8p + 7 of
// W_UV column g as one 16-byte word per 32-wide chunk c. MMA s (0, 1) of the chunk takes words
// 2s, 2s+1 as its B registers, which the MMA reads as k = 2p, 2p+1 and 2p+8, 2p+9. The A
// fragment is loaded with the same permutation (16 bytes per row at the same offset), so the
// products pair the same latent index on both sides: a dot product is order-free.
//
// e4m3 W_UV (fp8.cuh): a warp owns two groups of 8 columns (16w..16w+15 of the block's 64), so
// that a block holds as many W_UV bytes as the bf16 form's (8 x 16 bytes a group a thread) and
// the grid has half the blocks. A thread loads its column's latent indices 64i + 16p .. 64i + 16p
// + 15 as one 16-byte e4m3 word, whose halves are chunks 2i and 2i + 1 (device::ChunkStart; the A
// fragments follow): in 8-byte words, one a chunk, ColumnSplit took 1.03-1.11x the time at 64-128
// heads. The words stay e4m3 in registers until their chunk's MMAs, where each half is
// dequantized to a bf16 fragment with its block's scale (chunk c lies in latent block c / 4):
// dequantized ahead, the two groups' fragments would take 128 registers. The MMAs are the bf16
// ones.
//
// e4m3 output: a head's 128 columns are its 4 (e4m3 W_UV: 2) column blocks, launched as one cluster
// (ColumnSplitE4m3OutputKernel; blocks of one cluster share their rows, so they run or leave
// together). Each warp's amax of a row over its 8 (16) columns (a group's 4 lanes) is stored
// into every block of the cluster through distributed shared memory (device::ClusterRowAmax);
// once its block's copy is complete each thread reads its rows' amax locally and quantizes its
// own gated values.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/fp8.cuh"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/sm90.h"
#include "mla/kernels/timeline_stamps.cuh"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {
namespace {

constexpr int kThreads = 128;
constexpr int kChunks = kLatentDim / 32;      // 16 chunks of 32 latent values
constexpr int kWordsPerRow = kLatentDim / 8;  // 16-byte words per latent row

// A padded latent row in shared memory (elements): the 8 lanes of a quarter warp (rows g and
// g + 1, quarters 0-3) read 8 distinct 16-byte bank groups. bf16: 16-byte words 4q apart from a
// row 68 words long; e4m3: words 2q apart (plus the chunk's half) from a row 65 long.
template <WeightType kW>
constexpr int kSmemRowOf = kW == WeightType::kBf16 ? kLatentDim + 32 : kLatentDim + 8;

// A block's rows: 8 (one m16 tile whose rows 8-15 are zeros), 16 (one tile) or 32 (two). With
// 8 the latent goes straight into registers (no shared memory); 16 and 32 stage it in shared
// memory (in registers, 16 rows take 210 registers a thread and measured slower).
template <int kTileRows, WeightType kW>
constexpr size_t SmemBytes() {
  return kTileRows == 8 ? 0 : size_t{kTileRows} * kSmemRowOf<kW> * sizeof(bf16);
}

// Groups of 8 columns a warp owns: with e4m3 W_UV two, so that a block reads the bf16 form's bytes.
template <WeightType kW>
constexpr int kGroupsOf = kW == WeightType::kE4m3 ? 2 : 1;
template <WeightType kW>
constexpr int kColumnsOf = 32 * kGroupsOf<kW>;  // a block's columns (4 warps)

// The gate loads of each form (device::GateLoads): kWords for the 16-row bf16 kernel, with a gate
// and without; kPlain for the gated 8-row bf16 kernel and kOrNone for the ungated one; kPlain and
// kNone for the 32-row and e4m3 kernels. Measured (docs/design.md, "No gate"): the gated 8-row
// kernel took 0.81-1.02x kOrNone's time with kPlain (0.82-0.96x with kWords); without a gate
// kWords took 1.02-1.08x kOrNone's in the 8-row kernel, kOrNone 1.07x kWords's in the 16-row one.
// The null check made the gated 16-row kernel up to 1.1x slower; kWords made the 32-row kernel
// up to 1.31x slower, gated and not, and the null check the e4m3 forms up to 1.22x.
using device::GateLoads;

template <int kTileRows, bool kGated, WeightType kW, OutputType kO>
constexpr GateLoads kGateLoadsOf = [] {
  if (kTileRows == 16 && kW == WeightType::kBf16 && kO == OutputType::kBf16) {
    return GateLoads::kWords;
  }
  if (kGated) return GateLoads::kPlain;
  return kTileRows == 8 && kW == WeightType::kBf16 && kO == OutputType::kBf16 ? GateLoads::kOrNone
                                                                              : GateLoads::kNone;
}();

// kGate kNone: the tail without a gate (out = bf16(v)); every other form gates.
template <int kTileRows, GateLoads kGate, WeightType kW, OutputType kO>
__device__ __forceinline__ void ColumnSplitBlock(const FusedTailParams& p) {
  constexpr bool kGated = device::Gated(kGate);
  constexpr bool kGateMayBeNull = device::GateMayBeNull(kGate);
  constexpr int kGroups = kGroupsOf<kW>;
  constexpr int kColumns = kColumnsOf<kW>;
  constexpr int kRowTiles = kTileRows == 32 ? 2 : 1;
  constexpr int kRows = 16 * kRowTiles;
  constexpr bool kDirect = kTileRows == 8;
  constexpr int kHalves = kDirect ? 1 : 2;  // of each m16 tile: rows group and group + 8
  constexpr int kSmemRow = kSmemRowOf<kW>;
  extern __shared__ uint4 smem_words[];
  bf16* rows_smem = reinterpret_cast<bf16*>(smem_words);  // [kRows][kSmemRow]

  const int chunk = blockIdx.x;
  const int head = blockIdx.y;
  const int t0 = blockIdx.z * kTileRows;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const int column = chunk * kColumns + warp * 8 * kGroups;  // first of the warp's columns

  // The e4m3 output's amax exchange (below).
  using RowAmax = device::ClusterRowAmax<kValueDim / kColumns, kThreads / 32, kTileRows>;
  if constexpr (kO == OutputType::kE4m3) device::SharedObject<RowAmax>().Start();
  MLA_TIMELINE_STAMP(0);
  const int rows_before_wait = device::LiveRowsPinned(p.row_count, p.row_count_early, p.rows);
  // W_UV before the wait: weights are written by no upstream kernel. bf16 as the MMAs' fragments;
  // e4m3 as loaded (dequantized at their chunk's MMAs), with the head's block scales.
  const auto* w_column = device::WeightTraits<kW>::Base(p) + head * p.w_head_stride +
                         static_cast<int64_t>(column + group) * p.w_row_stride +
                         device::ChunkStart<kW>(0, quarter);
  uint4 w_fragment[kW == WeightType::kBf16 ? kChunks : 1];
  uint4 w_raw[kGroups][kW == WeightType::kE4m3 ? kChunks / 2 : 1];  // chunks 2i, 2i + 1
  float4 scales;
  if constexpr (kW == WeightType::kBf16) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) w_fragment[c] = device::LoadWeight16(w_column + 32 * c);
  } else {
    scales = device::LoadBlockScales<kW>(p, head);
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
#pragma unroll
      for (int i = 0; i < kChunks / 2; ++i) {
        w_raw[j][i] = device::LoadWeight16(w_column + 8 * j * p.w_row_stride +
                                           device::ChunkStart<kW>(2 * i, 0));
      }
    }
  }
  device::PrefetchBlockInputsL2<kGated, kGateMayBeNull>(p, head, t0, kTileRows, 0, kLatentDim,
                                                        chunk * kColumns, kColumns);

  device::GridDependencyWait();
  MLA_TIMELINE_STAMP(1);
  // Rows at and past the live count are neither read nor written, except that rows below
  // read_rows may be read where rows past the count are readable.
  const int read_rows =
      device::ReadRowsAfterWait(p.row_count, rows_before_wait, p.rows_past_count_readable, p.rows);
  if (t0 >= read_rows) return;
  const int rows_as_loaded = device::LiveRowsAsLoaded(p.row_count, p.row_count_early,
                                                      p.rows_past_count_readable, read_rows);

  const bf16* latent_head = p.latent + head * kLatentDim;
  // 8 rows: each thread loads its A fragments (row `group`, the k permutation of W_UV) straight
  // into registers, with no shared-memory hop or block barrier; rows past the end read the last
  // row, whose products are never stored. Without shared memory the blocks can also start on
  // multiprocessors an upstream kernel has configured for its own (docs/design.md).
  uint4 a_rows[kDirect ? kChunks : 1];
  if constexpr (kDirect) {
    // The quarter's start added to the row once (bf16) or to each load (e4m3): the forms measured,
    // whose instructions differ.
    constexpr bool kQuarterInRow = kW == WeightType::kBf16;
    const bf16* row = latent_head + min(t0 + group, read_rows - 1) * p.latent_row_stride +
                      (kQuarterInRow ? device::ChunkStart<kW>(0, quarter) : 0);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int k =
          kQuarterInRow ? device::ChunkStart<kW>(c, 0) : device::ChunkStart<kW>(c, quarter);
      a_rows[c] = *reinterpret_cast<const uint4*>(row + k);
    }
  } else {
    for (int i = threadIdx.x; i < kRows * kWordsPerRow; i += kThreads) {
      const int r = i / kWordsPerRow;
      const int word = i % kWordsPerRow;
      const bool valid = t0 + r < read_rows;
      const bf16* src = valid ? latent_head + (t0 + r) * p.latent_row_stride + word * 8 : p.latent;
      device::CopyAsync16(rows_smem + r * kSmemRow + word * 8, src, valid);
    }
  }

  // This thread's outputs: rows group and group + 8 of each tile, columns 2q, 2q+1 of the warp's.
  // Their gate words and lengths are loaded without branches (rows past the end read the last
  // row, whose result is not stored) and first used in the epilogue, so that all of them are in
  // flight together: loads under `if (t < rows)` would each be waited for inside their branch,
  // one memory round trip per half.
  // Group j's columns start 8j past out_column.
  const int out_column = head * kValueDim + column + 2 * quarter;
  uint32_t gate_word[kGroups][kRowTiles][kHalves];
  int32_t length[kRowTiles][kHalves];
  const device::GateWords gate_words = device::GateWords::Of(p.gate, p.gate_row_stride);
#pragma unroll
  for (int tile = 0; tile < kRowTiles; ++tile) {
#pragma unroll
    for (int half = 0; half < kHalves; ++half) {
      const int t = min(t0 + tile * 16 + group + 8 * half, read_rows - 1);
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        if constexpr (kGate == GateLoads::kWords) {
          gate_word[j][tile][half] = gate_words.Load(t, out_column + 8 * j);
        } else if constexpr (kGate == GateLoads::kOrNone) {
          gate_word[j][tile][half] =
              device::GateWordOrNone(p.gate, t * p.gate_row_stride + out_column + 8 * j);
        } else if constexpr (kGate == GateLoads::kPlain) {
          gate_word[j][tile][half] = *reinterpret_cast<const uint32_t*>(
              p.gate + t * p.gate_row_stride + out_column + 8 * j);
        } else {
          gate_word[j][tile][half] = 0;
        }
      }
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
  if constexpr (kW == WeightType::kBf16) {
    MLA_TIMELINE_STAMP_AFTER(3, w_fragment[0].x ^ w_fragment[kChunks - 1].w);
  } else {
    MLA_TIMELINE_STAMP_AFTER(3, w_raw[0][0].x ^ w_raw[kGroups - 1][kChunks / 2 - 1].w);
  }
  // A block of none of the live rows leaves once its loads are issued. With this branch (which
  // without a count never fires) ColumnSplit measured faster at 8-96 heads x 1-16 rows, for a
  // reason its machine code does not show: the trigger preceded the MMAs before too
  // (docs/design.md).
  const int rows = device::ClampRows(rows_as_loaded, p.rows);
  if (t0 >= rows) return;

  // Accumulator chains: one per MMA of a chunk and column group, and with 8 rows and one group
  // one per chunk parity as well: there nothing else runs beside the MMAs to hide their latency
  // (with shared-memory reads in the loop, four chains measured no faster with one row tile and
  // slower with two).
  constexpr int kParities = kDirect && kGroups == 1 ? 2 : 1;
  float acc[kGroups][kRowTiles][kParities][2][4] = {};
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    uint4 w[kGroups];
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      if constexpr (kW == WeightType::kBf16) {
        w[j] = w_fragment[c];
      } else {
        w[j] = device::DequantizeE4m3x8(device::E4m3Half(w_raw[j][c / 2], c % 2),
                                        device::BlockScale(scales, c / 4));
      }
    }
#pragma unroll
    for (int tile = 0; tile < kRowTiles; ++tile) {
      uint4 x, y;
      if constexpr (kDirect) {
        x = a_rows[c];
        y = make_uint4(0, 0, 0, 0);  // rows 8-15
      } else {
        const bf16* row_lo =
            rows_smem + (tile * 16 + group) * kSmemRow + device::ChunkStart<kW>(c, quarter);
        x = *reinterpret_cast<const uint4*>(row_lo);
        y = *reinterpret_cast<const uint4*>(row_lo + 8 * kSmemRow);
      }
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        float(&chain)[2][4] = acc[j][tile][c % kParities];
        device::MmaBf16(chain[0], x.x, y.x, x.y, y.y, w[j].x, w[j].y);
        device::MmaBf16(chain[1], x.z, y.z, x.w, y.w, w[j].z, w[j].w);
      }
    }
  }

  // Pair (group, tile, half): accumulator e of the m16n8 tile is row group (+8 for e >= 2),
  // column 2q + (e & 1) of the group's 8.
  const auto sum = [&](int j, int tile, int e) {
    float s0 = acc[j][tile][0][0][e];
    float s1 = acc[j][tile][0][1][e];
#pragma unroll
    for (int parity = 1; parity < kParities; ++parity) {
      s0 += acc[j][tile][parity][0][e];
      s1 += acc[j][tile][parity][1][e];
    }
    return s0 + s1;
  };
  MLA_TIMELINE_STAMP_AFTER(10,
                           __float_as_uint(acc[0][0][0][0][0] + acc[0][0][kParities - 1][1][0]));
  constexpr int kRowPairs = kRowTiles * kHalves;  // a group's pairs
  constexpr int kPairs = kGroups * kRowPairs;     // pair i: group i / kRowPairs
  float v[2 * kPairs];
  uint32_t gates[kPairs];
  bool active[kPairs];
  uint32_t out[kPairs];
#pragma unroll
  for (int j = 0; j < kGroups; ++j) {
#pragma unroll
    for (int tile = 0; tile < kRowTiles; ++tile) {
#pragma unroll
      for (int half = 0; half < kHalves; ++half) {
        const int i = kRowPairs * j + kHalves * tile + half;
        v[2 * i] = __bfloat162float(__float2bfloat16_rn(sum(j, tile, 2 * half)));
        v[2 * i + 1] = __bfloat162float(__float2bfloat16_rn(sum(j, tile, 2 * half + 1)));
        gates[i] = gate_word[j][tile][half];
        active[i] = length[tile][half] > 0;
      }
    }
  }
  device::EpiloguePairs<kGated>(v, gates, active, out);
  MLA_TIMELINE_STAMP_AFTER(11, out[0] ^ out[kPairs - 1]);
  if constexpr (kO == OutputType::kBf16) {
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
#pragma unroll
      for (int tile = 0; tile < kRowTiles; ++tile) {
#pragma unroll
        for (int half = 0; half < kHalves; ++half) {
          const int t = t0 + tile * 16 + group + 8 * half;
          if (t >= rows) continue;
          *reinterpret_cast<uint32_t*>(p.output + t * p.output_row_stride + out_column + 8 * j) =
              out[kRowPairs * j + kHalves * tile + half];
        }
      }
    }
  } else {
    // Row r's parts: each warp's amax over its columns, from each block of the cluster.
    RowAmax& amax = device::SharedObject<RowAmax>();
    amax.AwaitStarts();
#pragma unroll
    for (int i = 0; i < kRowPairs; ++i) {
      const int r = (i / kHalves) * 16 + group + 8 * (i % kHalves);
      uint32_t m = 0;
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        m = max(m, device::Bf16x2MagnitudeMax(out[kRowPairs * j + i]));
      }
      m = device::GroupMax<4>(m);
      if (quarter == 0) amax.Publish(r, warp, m);
    }
    amax.Await();
    const bool scale_writer = device::ClusterRank() == 0 && warp == 0 && quarter == 0;
#pragma unroll
    for (int i = 0; i < kRowPairs; ++i) {
      const int r = (i / kHalves) * 16 + group + 8 * (i % kHalves);
      const device::OutputScale scale = device::OutputScaleOf(amax.Max(r));
      const int t = t0 + r;
#pragma unroll
      for (int j = 0; j < kGroups; ++j) {
        const float2 x = device::Bf16x2ToFloat2(out[kRowPairs * j + i]);
        const uint16_t q = device::QuantizeE4m3x2(x.x, x.y, scale.inverse, scale.zero);
        if (t >= rows) continue;
        *reinterpret_cast<uint16_t*>(p.output_fp8 + t * p.output_row_stride + out_column + 8 * j) =
            q;
      }
      if (t < rows && scale_writer) {
        p.output_scale[t * p.output_scale_row_stride + head * p.output_scale_head_stride] =
            scale.scale;
      }
    }
  }
  MLA_TIMELINE_STAMP(12);
}

template <int kTileRows, GateLoads kGate, WeightType kW>
__global__ void __launch_bounds__(kThreads) ColumnSplitKernel(const FusedTailParams p) {
  ColumnSplitBlock<kTileRows, kGate, kW, OutputType::kBf16>(p);
}

// The e4m3 output: a head's column blocks in one cluster. One block a multiprocessor asked for
// with e4m3 W_UV: without it ptxas held the 32-row kernel to 128 registers and spilled.
template <int kTileRows, GateLoads kGate, WeightType kW>
__global__ void __launch_bounds__(kThreads, kW == WeightType::kE4m3 ? 1 : 0)
    __cluster_dims__(kValueDim / kColumnsOf<kW>, 1, 1)
        ColumnSplitE4m3OutputKernel(const FusedTailParams p) {
  ColumnSplitBlock<kTileRows, kGate, kW, OutputType::kE4m3>(p);
}

// 8 rows: held to 144 registers a thread, so that three blocks still fit beside an upstream
// kernel's (docs/design.md). e4m3 W_UV (two groups' 8-byte words held to their MMAs) and the
// e4m3 output's epilogue hold a few more (144 spilled; 160 still fit three). The timeline
// stamps, where compiled in, take their own on top, up to the 168 at which three still fit.
template <WeightType kW, OutputType kO>
constexpr int kDirectMaxRegisters = std::min(
    (kW == WeightType::kBf16 && kO == OutputType::kBf16 ? 144 : 160) + MLA_TIMELINE_STAMP_REGISTERS,
    168);

template <GateLoads kGate, WeightType kW>
__global__ void __maxnreg__((kDirectMaxRegisters<kW, OutputType::kBf16>))
    ColumnSplitDirectKernel(const FusedTailParams p) {
  ColumnSplitBlock<8, kGate, kW, OutputType::kBf16>(p);
}

template <GateLoads kGate, WeightType kW>
__global__ void __maxnreg__((kDirectMaxRegisters<kW, OutputType::kE4m3>))
    __cluster_dims__(kValueDim / kColumnsOf<kW>, 1, 1)
        ColumnSplitDirectE4m3OutputKernel(const FusedTailParams p) {
  ColumnSplitBlock<8, kGate, kW, OutputType::kE4m3>(p);
}

// The kernel for the tail with a gate (kGated) or without (the same one for 16-row bf16 blocks).
template <int kTileRows, bool kGated, WeightType kW, OutputType kO>
constexpr void (*KernelOf())(const FusedTailParams) {
  constexpr GateLoads kGate = kGateLoadsOf<kTileRows, kGated, kW, kO>;
  if constexpr (kO == OutputType::kE4m3) {
    if constexpr (kTileRows == 8) {
      return ColumnSplitDirectE4m3OutputKernel<kGate, kW>;
    } else {
      return ColumnSplitE4m3OutputKernel<kTileRows, kGate, kW>;
    }
  } else if constexpr (kTileRows == 8) {
    return ColumnSplitDirectKernel<kGate, kW>;
  } else {
    return ColumnSplitKernel<kTileRows, kGate, kW>;
  }
}

template <int kTileRows, WeightType kW, OutputType kO>
KernelLaunch LaunchOf(int heads, int rows, bool gated) {
  static_assert(SmemBytes<kTileRows, kW>() <= kSharedMemoryWithoutOptIn, "no opt-in needed");
  KernelLaunch launch;
  launch.function = gated ? reinterpret_cast<const void*>(KernelOf<kTileRows, true, kW, kO>())
                          : reinterpret_cast<const void*>(KernelOf<kTileRows, false, kW, kO>());
  launch.grid = dim3(kValueDim / kColumnsOf<kW>, heads, (rows + kTileRows - 1) / kTileRows);
  launch.block = dim3(kThreads);
  launch.smem_bytes = SmemBytes<kTileRows, kW>();
  return launch;
}

}  // namespace

int ColumnSplitBlockRows(int heads, int rows, int multiprocessors, WeightType weight) {
  const int blocks_per_row_block =
      (kValueDim / (weight == WeightType::kE4m3 ? kColumnsOf<WeightType::kE4m3>
                                                : kColumnsOf<WeightType::kBf16>)) *
      heads;
  // 8 rows (the measurements behind both cases: docs/design.md):
  // - up to 8 rows while the grid fits the multiprocessors at the three blocks a multiprocessor
  //   their registers allow (132 on an H200: up to 99 heads, 198 with e4m3 W_UV); past that
  //   they take two waves;
  // - bf16 W_UV at 9-32 rows: ceil(rows / 8) a column block, each reading W_UV, while the grid
  //   has at most one block a multiprocessor (up to 16 heads at 16 rows, 8 at 32). e4m3 blocks,
  //   which dequantize their W_UV after the wait, each do that again: 16 heads x 32 rows took
  //   3.37 us in 8-row blocks against 2.67 in 32-column 16-row blocks.
  if (rows <= 8 && blocks_per_row_block <= 3 * multiprocessors) return 8;
  if (weight == WeightType::kBf16 &&
      dispatch_internal::EightRowBlocksFitOneWave(heads, rows, multiprocessors)) {
    return 8;
  }
  // 32 while the grid of 32-row blocks still has two blocks per multiprocessor. 64 rows (69 KB of
  // shared memory a block) measured 2-3x slower per row on the H200, and such batches take other
  // kernels anyway.
  return rows >= 32 && blocks_per_row_block * (rows / 32) >= 2 * multiprocessors ? 32 : 16;
}

cudaError_t LoadColumnSplit() {
  cudaError_t e = cudaSuccess;
  ForEachTypes([&](auto w, auto o) {
    constexpr WeightType kW = decltype(w)::value;
    constexpr OutputType kO = decltype(o)::value;
    for (cudaError_t (*load)() :
         {+[] { return LoadKernel(KernelOf<8, true, kW, kO>(), SmemBytes<8, kW>()); },
          +[] { return LoadKernel(KernelOf<16, true, kW, kO>(), SmemBytes<16, kW>()); },
          +[] { return LoadKernel(KernelOf<32, true, kW, kO>(), SmemBytes<32, kW>()); },
          +[] { return LoadKernel(KernelOf<8, false, kW, kO>(), SmemBytes<8, kW>()); },
          +[] { return LoadKernel(KernelOf<16, false, kW, kO>(), SmemBytes<16, kW>()); },
          +[] { return LoadKernel(KernelOf<32, false, kW, kO>(), SmemBytes<32, kW>()); }}) {
      if (e == cudaSuccess) e = load();
    }
  });
  return e;
}

template <WeightType kW, OutputType kO>
KernelLaunch PlanColumnSplit(int heads, int rows, int multiprocessors, bool gated) {
  switch (ColumnSplitBlockRows(heads, rows, multiprocessors, kW)) {
    case 8:
      return LaunchOf<8, kW, kO>(heads, rows, gated);
    case 16:
      return LaunchOf<16, kW, kO>(heads, rows, gated);
    default:
      return LaunchOf<32, kW, kO>(heads, rows, gated);
  }
}
template KernelLaunch PlanColumnSplit<WeightType::kBf16, OutputType::kBf16>(int, int, int, bool);
template KernelLaunch PlanColumnSplit<WeightType::kE4m3, OutputType::kBf16>(int, int, int, bool);
template KernelLaunch PlanColumnSplit<WeightType::kBf16, OutputType::kE4m3>(int, int, int, bool);
template KernelLaunch PlanColumnSplit<WeightType::kE4m3, OutputType::kE4m3>(int, int, int, bool);

}  // namespace mla_tail::internal

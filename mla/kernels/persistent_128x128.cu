// Persistent128x128: the persistent 128 x 128 kernel for large batches, warp-specialized: its
// copies and its MMAs run in separate warps.
//
// A block (one a multiprocessor) loops over tiles blockIdx.x + n * gridDim.x of (head, 128 rows,
// all 128 columns), numbered head-major so that the blocks running at one time share their
// heads' W_UV in L2. Three warpgroups:
//   - the producer (warpgroup 0) copies each K step's W_UV slice [128][64] and latent slice
//     [128][64] with cp.async into a ring of kStages buffers, and each tile's gate and lengths
//     into one epilogue buffer. It waits only for a buffer to be free ("empty" mbarrier) and
//     signals each one full with cp.async.mbarrier.arrive, which fires when its copies land: it
//     never waits for a copy, so every free buffer is always being filled.
//   - two consumers (warpgroups 1-2), 64 rows each, wait for a step's buffer, run its four
//     wgmma m64n128k16 on the shared W_UV slice, and free the buffer once those MMAs are done
//     (one step later: each step's MMAs run on while the next step's buffer is awaited). After
//     a tile's last step they gate their 64 rows (docs/spec.md: bf16 v, FP32 sigmoid) and store
//     them.
//     With one tile a block (the launch decides: PersistentEarlySigmoids), they compute the
//     sigmoids during the tile's last four steps instead, and the epilogue only multiplies and
//     rounds.
// Why warp-specialized: with a __syncthreads a step, a buffer is refilled only after every
// thread has passed the next step's barrier, so each step's MMA chain sits on the copy path.
// Here the copies never wait for the MMAs; the gate stays with the consumers (docs/design.md).
//
// Shared layout: the canonical K-major 128-byte swizzle of wgmma (wgmma.cuh) for the operand
// buffers; the gate tile with row r's 16-byte word w at word w ^ (r % 8), which the epilogue
// overwrites with its results before storing them, 16 bytes a thread. No L2 prefetch before the
// dependency wait (prefetch.cuh): the kernel serves tails far above that hint's limit.
//
// e4m3 W_UV (fp8.cuh, tile_copy.cuh): the producer copies each step's slice as e4m3 into the
// stage's W_UV area; once the stage is full, the 256 consumer threads dequantize it in place into
// the bf16 swizzled layout (two words each), fence, and meet at a named barrier before the MMAs:
// both consumer warpgroups read every column of the slice.
//
// e4m3 output: a tile holds whole heads' rows, so a row's amax is a shuffle over the 4 lanes that
// store it (fp8.cuh, GatedRowWords); a lane quantizes 32 of a row's values a pass.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/early_sigmoids.cuh"
#include "mla/kernels/fp8.cuh"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/mbarrier.cuh"
#include "mla/kernels/params.h"
#include "mla/kernels/sm90.h"
#include "mla/kernels/tile_copy.cuh"
#include "mla/kernels/wgmma.cuh"

namespace mla_tail::internal {
namespace {

// 128 rows (two consumer warpgroups of 64) x all 128 columns; the producer's 128 threads copy
// (tile_copy.cuh).
struct PersistentTile : device::TileLayout<128, 128, kValueDim> {
  static constexpr int kStages = 6;
  static constexpr int kProducerThreads = kCopyThreads;
  static constexpr int kThreads = 3 * 128;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kConsumerThreads = 256;
  // The register file split (launch bounds give 168 a thread): addresses for the producer,
  // 64 accumulators and the epilogue for the consumers.
  static constexpr int kProducerRegisters = 88;
  static constexpr int kConsumerRegisters = 208;
  static constexpr int kGateOffset = kStages * kStageBytes;
  static constexpr int kLengthsOffset = kGateOffset + kRows * kGateRowBytes;
  static constexpr int kBarriersOffset = kLengthsOffset + kRows * int(sizeof(int32_t));
  static constexpr int kBarriers = 2 * kStages + 2;  // full[], empty[], gate full, gate empty
  static constexpr size_t kSmemBytes = kBarriersOffset + kBarriers * sizeof(uint64_t) + kAlign;
  static_assert(kSmemBytes <= kSharedMemoryPerBlock, "one block a multiprocessor");
  static_assert(kProducerThreads * kProducerRegisters + 2 * 128 * kConsumerRegisters <=
                    kThreads * (65536 / kThreads / 8 * 8),
                "the warpgroups' registers fit in what the launch gives the block");
};

// The gate's sigmoids (docs/spec.md's s) computed during a tile's last K steps, 8 pairs a step
// while that step's MMAs run, so that the epilogue only multiplies and rounds (otherwise its exp
// and reciprocals queue on the multiprocessor's MUFU unit). Only where each block has one tile
// (correct with more, but slower): the gate buffer is free at a block's first tile, so its gate
// is copied with the first step; a later tile's gate waits for the previous tile's epilogue, and
// awaiting it mid-tile is slower (docs/design.md). With kEnabled false: nothing, and the epilogue
// computes them.
template <bool kEnabled>
struct PersistentEarlySigmoids {
  static constexpr int kGateStep = PersistentTile::kSteps - 2;  // the producer's gate copy
  __device__ __forceinline__ void Step(int, uint64_t*, uint32_t, const uint8_t*, const int32_t*) {}
};

template <>
struct PersistentEarlySigmoids<true> {
  static constexpr int kGateStep = 0;
  // Accumulator 4j + e: row 16 * warp + group (+8 for e >= 2) of the warpgroup's 64, column
  // 8j + 2 * quarter + (e & 1).
  struct Layout {
    static __device__ __forceinline__ int Row(int n) {
      const int consumer = threadIdx.x - PersistentTile::kProducerThreads;
      return 64 * (consumer / 128) + 16 * (consumer % 128 / 32) + 8 * (n % 2) +
             threadIdx.x % 32 / 4;
    }
    static __device__ __forceinline__ int GateOffset(int n) {
      return PersistentTile::GateWord(Row(n), n / 2) + 4 * (threadIdx.x % 4);
    }
  };
  static constexpr int kPairs = 2 * (PersistentTile::kCols / 8);
  static constexpr int kFrom = PersistentTile::kSteps / 2;  // the gate is awaited from this step
  static constexpr int kPairsPerStep = kPairs / (PersistentTile::kSteps - kFrom);
  device::EarlySigmoidPairs<Layout, kPairs> pairs;

  __device__ __forceinline__ void Step(int step, uint64_t* gate_full, uint32_t gate_phase,
                                       const uint8_t* gate_tile, const int32_t* lengths) {
    if (step < kFrom) return;
    if (step == kFrom) device::MbarrierWait(gate_full, gate_phase);
    pairs.Compute((step - kFrom) * kPairsPerStep, (step - kFrom + 1) * kPairsPerStep, gate_tile,
                  lengths);
  }
  __device__ __forceinline__ void Gate(const float* acc, uint8_t* gate_tile,
                                       const int32_t* lengths) {
    pairs.Gate(acc, gate_tile, lengths);
  }
};

// kGated false: the tail without a gate (out = bf16(v)), which loads none.
// The consumers' named barrier after a step's e4m3 slice is dequantized (the epilogue's are
// 1 + warpgroup).
constexpr int kDequantizedBarrier = 3;

template <bool kEarlySigmoids, bool kGated, WeightType kW, OutputType kO>
__global__ void __launch_bounds__(PersistentTile::kThreads, 1)
    Persistent128x128Kernel(const FusedTailParams p) {
  static_assert(kGated || !kEarlySigmoids, "early sigmoids need a gate");
  using Early = PersistentEarlySigmoids<kEarlySigmoids>;
  using T = PersistentTile;
  extern __shared__ uint4 smem_words[];
  const uint32_t smem_raw = device::SmemAddress(smem_words);
  const uint32_t smem_base = (smem_raw + T::kAlign - 1) & ~uint32_t{T::kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);
  uint8_t* const gate_tile = smem + T::kGateOffset;
  int32_t* const lengths = reinterpret_cast<int32_t*>(smem + T::kLengthsOffset);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + T::kBarriersOffset);
  uint64_t* const empty = full + T::kStages;
  uint64_t* const gate_full = empty + T::kStages;
  uint64_t* const gate_empty = gate_full + 1;

  // A buffer is freed by one arrival a consumer warp, after the warp's MMAs on it: the MMAs
  // read it through the async proxy and nothing else of the warp's touched it. With e4m3 W_UV
  // every consumer thread has also written it (the dequantization), so each thread arrives: its
  // own release orders its writes before the producer's next copies into the buffer.
  constexpr bool kEveryConsumerFrees = kW == WeightType::kE4m3;
  auto free_buffer = [&](int buffer) {
    if constexpr (kEveryConsumerFrees) {
      device::MbarrierArrive(&empty[buffer]);
    } else {
      __syncwarp();
      if (threadIdx.x % 32 == 0) device::MbarrierArrive(&empty[buffer]);
    }
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      device::MbarrierInit(&full[s], T::kProducerThreads);
      device::MbarrierInit(&empty[s],
                           kEveryConsumerFrees ? T::kConsumerThreads : T::kConsumerWarps);
    }
    device::MbarrierInit(gate_full, T::kProducerThreads);
    device::MbarrierInit(gate_empty, T::kConsumerThreads);
  }
  __syncthreads();

  const int row_tiles = (p.rows + T::kRows - 1) / T::kRows;
  const int tiles = (p.heads * row_tiles - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1;
  using Tile = device::TileAt;  // all 128 columns: column0 0
  auto tile_at = [&](int i) {
    const int j = blockIdx.x + i * gridDim.x;
    return Tile{j / row_tiles, 0, j % row_tiles * T::kRows};
  };

  if (threadIdx.x < T::kProducerThreads) {
    // ---- Producer ----
    device::WarpgroupRegistersDown<T::kProducerRegisters>();
    const device::TileCopier<T, false, kW> copier(p);
    int read_rows = p.rows;  // the rows its copies may touch, once known (after the wait)
    auto copy_w = [&](const Tile& c, int step, int stage) { copier.W(p, smem, c, step, stage); };
    auto copy_latent = [&](const Tile& c, int step, int stage) {
      copier.Latent(p, read_rows, smem, c, step, stage);
    };
    auto copy_epilogue_inputs = [&](const Tile& c) {
      copier.template EpilogueInputs<kGated>(p, read_rows, c, gate_tile,
                                             reinterpret_cast<uint8_t*>(lengths));
    };

    // W_UV is no upstream kernel's output: the first buffers' share goes before the wait.
    const Tile first = tile_at(0);
    const int rows_before_wait = device::LiveRowsPinned(p.row_count, p.row_count_early, p.rows);
    constexpr int kEarly = T::kStages < T::kSteps ? T::kStages : T::kSteps;
#pragma unroll
    for (int step = 0; step < kEarly; ++step) copy_w(first, step, step);
    device::GridDependencyWait();
    // Tiles whose rows all lie at or past the live count are skipped (by the consumers too),
    // where rows past it may not be read; `served` counts the tiles served. The early W_UV
    // copies are tile 0's: when the first tile served has another head, they land first and its
    // W_UV is copied anew.
    read_rows = device::ReadRowsAfterWait(p.row_count, rows_before_wait, p.rows_past_count_readable,
                                          p.rows);
    const bool early_w_wrong = first.t0 >= read_rows && tiles > 1;
    if (early_w_wrong) device::CopyAsyncCommitAndWaitAll();

    int stage = 0;
    uint32_t phase = 0;  // of the buffers' use: the n-th fill of a buffer is phase n
    int served = 0;
    for (int i = 0; i < tiles; ++i) {
      const Tile tile = tile_at(i);
      if (tile.t0 >= read_rows) continue;
#pragma unroll 1
      for (int step = 0; step < T::kSteps; ++step) {
        // The gate buffer is free once the previous tile's epilogue is done, which is when
        // the consumers start on this tile; by step 6 the ring is full of this tile's steps,
        // so waiting here holds back no copy. With early sigmoids the gate goes first: the
        // consumers await it from step 4 (and a block has one tile, so nothing is waited for).
        if (step == Early::kGateStep) {
          if (served > 0) device::MbarrierWait(gate_empty, (served - 1) & 1);
          copy_epilogue_inputs(tile);
          device::MbarrierArriveOnCopies(gate_full);
        }
        if (served > 0 || step >= T::kStages) device::MbarrierWait(&empty[stage], (phase - 1) & 1);
        if (served > 0 || step >= kEarly || (early_w_wrong && tile.head != first.head)) {
          copy_w(tile, step, stage);
        }
        copy_latent(tile, step, stage);
        device::MbarrierArriveOnCopies(&full[stage]);
        if (++stage == T::kStages) {
          stage = 0;
          ++phase;
        }
      }
      ++served;
    }
    // Every upstream-written read is issued: dependents may launch.
    device::LaunchDependents();
    if (served == 0) {
      device::CopyAsyncCommitAndWaitAll();  // the early W_UV copies, which no tile used
    } else {
      device::CopyAsyncWait<0>();
    }
    return;
  }

  // ---- Consumers ----
  device::WarpgroupRegistersUp<T::kConsumerRegisters>();
  const int rows_before_wait = device::LiveRowsPinned(p.row_count, p.row_count_early, p.rows);
  device::GridDependencyWait();  // orders the output stores after the upstream kernels
  // As the producer skips (read_rows); rows at and past `rows` are not stored.
  const int read_rows =
      device::ReadRowsAfterWait(p.row_count, rows_before_wait, p.rows_past_count_readable, p.rows);
  const int rows_as_loaded = device::LiveRowsAsLoaded(p.row_count, p.row_count_early,
                                                      p.rows_past_count_readable, read_rows);
  const int consumer = threadIdx.x - T::kProducerThreads;  // 0..255
  const int warpgroup = consumer / 128;
  const int warp = consumer % 128 / 32;  // within the warpgroup
  const int lane = threadIdx.x % 32;
  const uint64_t a_desc0 =
      device::SmemDescriptor(smem_base + T::kWBytes + warpgroup * 64 * T::kRowBytes);
  const uint64_t b_desc0 = device::SmemDescriptor(smem_base);

  int stage = 0;
  uint32_t phase = 0;
  int served = 0;  // tiles served
  for (int i = 0; i < tiles; ++i) {
    const Tile tile = tile_at(i);
    if (tile.t0 >= read_rows) continue;
    const float4 scales = device::LoadBlockScales<kW>(p, tile.head);
    float acc[T::kCols / 2];
#pragma unroll
    for (int j = 0; j < T::kCols / 2; ++j) acc[j] = 0.0f;

    Early early;
    int previous = 0;  // the buffer of the step before
#pragma unroll(kEarlySigmoids ? T::kSteps : 1)
    for (int step = 0; step < T::kSteps; ++step) {
      device::MbarrierWait(&full[stage], phase & 1);
      if constexpr (kW == WeightType::kE4m3) {
        device::E4m3Slice<T::kCols>::Dequantize<T::kConsumerThreads>(
            smem + stage * T::kStageBytes, consumer, device::BlockScale(scales, step / 2));
      }
      device::FenceProxyAsyncShared();  // cp.async (and the dequantization) wrote it
      if constexpr (kW == WeightType::kE4m3) {
        device::NamedBarrier(kDequantizedBarrier, T::kConsumerThreads);
      }
      const uint64_t stage_offset = static_cast<uint64_t>(stage * T::kStageBytes) >> 4;
      device::FenceAccumulators(acc);
      device::WgmmaFence();
#pragma unroll
      for (int k = 0; k < T::kStepK / 16; ++k) {
        device::Wgmma64xN(acc, a_desc0 + stage_offset + 2 * k, b_desc0 + stage_offset + 2 * k);
      }
      device::WgmmaCommit();
      early.Step(step, gate_full, served & 1, gate_tile, lengths);
      device::WgmmaWait<1>();  // the step before is done: free its buffer
      device::FenceAccumulators(acc);
      if (step > 0) free_buffer(previous);
      previous = stage;
      if (++stage == T::kStages) {
        stage = 0;
        ++phase;
      }
    }
    device::WgmmaWait<0>();
    device::FenceAccumulators(acc);
    free_buffer(previous);

    if constexpr (kEarlySigmoids) {
      early.Gate(acc, gate_tile, lengths);
    } else {
      // Epilogue. Accumulator 4j + e: row 16 * warp + group (+8 for e >= 2) of the warpgroup's
      // 64, column 8j + 2 * quarter + (e & 1). One half (8 rows) at a time: 16 pairs beside the
      // accumulators.
      device::MbarrierWait(gate_full, served & 1);
      constexpr int kOutTiles = T::kCols / 8;
      const int group = lane / 4;
      const int quarter = lane % 4;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = 64 * warpgroup + 16 * warp + 8 * half + group;
        float v[2 * kOutTiles];
        uint32_t gates[kOutTiles];
        bool active[kOutTiles];
        uint32_t gated[kOutTiles];
        const bool row_active = lengths[row] > 0;
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          v[2 * j] = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half]));
          v[2 * j + 1] = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half + 1]));
          gates[j] =
              *reinterpret_cast<const uint32_t*>(gate_tile + T::GateWord(row, j) + 4 * quarter);
          active[j] = row_active;
        }
        device::EpiloguePairs<kGated>(v, gates, active, gated);
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          *reinterpret_cast<uint32_t*>(gate_tile + T::GateWord(row, j) + 4 * quarter) = gated[j];
        }
      }
    }
    device::NamedBarrier(1 + warpgroup, 128);
    const int rows = device::ClampRows(rows_as_loaded, p.rows);
    const int k = consumer % 128;
    if constexpr (kO == OutputType::kBf16) {
      // The warpgroup's 64 rows leave in 16-byte stores: word w of row r.
      const int word = k % T::kGateWordsPerRow;
#pragma unroll
      for (int n = 0; n < 64 / 8; ++n) {
        const int r = 64 * warpgroup + k / T::kGateWordsPerRow + 8 * n;
        const int t = tile.t0 + r;
        if (t >= rows) continue;
        *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + tile.head * kValueDim +
                                  8 * word) =
            *reinterpret_cast<const uint4*>(gate_tile + T::GateWord(r, word));
      }
    } else {
      // Four lanes a row, four words each: the row's amax in two shuffles, its scale once.
      using Words = device::GatedRowWords<T, 4>;
      constexpr int kRowsPerPass = 128 / Words::kLanes;
      const int part = lane % Words::kLanes;
      const int warp_row = 64 * warpgroup + Words::kRowsPerWarp * warp + Words::RowInWarp(lane);
#pragma unroll
      for (int n = 0; n < 64 / kRowsPerPass; ++n) {
        const int r = warp_row + kRowsPerPass * n;
        const int t = tile.t0 + r;
        Words words;
        words.Load(gate_tile, r, part);
        const device::OutputScale scale =
            device::OutputScaleOf(device::GroupMax<Words::kLanes>(words.MagnitudeMax()));
        if (t >= rows) continue;
        words.Store(p.output_fp8 + t * p.output_row_stride + tile.head * kValueDim, part, scale);
        if (part == 0) {
          p.output_scale[t * p.output_scale_row_stride + tile.head * p.output_scale_head_stride] =
              scale.scale;
        }
      }
    }
    // Every thread arrives: its own reads of the gate buffer happen before the refill.
    device::MbarrierArrive(gate_empty);
    ++served;
  }
}

}  // namespace

cudaError_t LoadPersistent128x128() {
  cudaError_t e = cudaSuccess;
  ForEachTypes([&](auto w, auto o) {
    constexpr WeightType kW = decltype(w)::value;
    constexpr OutputType kO = decltype(o)::value;
    for (const void* kernel :
         {reinterpret_cast<const void*>(Persistent128x128Kernel<true, true, kW, kO>),
          reinterpret_cast<const void*>(Persistent128x128Kernel<false, true, kW, kO>),
          reinterpret_cast<const void*>(Persistent128x128Kernel<false, false, kW, kO>)}) {
      if (e == cudaSuccess) e = LoadKernel(kernel, PersistentTile::kSmemBytes);
    }
  });
  return e;
}

// As many rounds of tiles as the GPU needs, on the fewest blocks that keep that many (every
// block as busy, and more bandwidth for each); with one round, the kernel with early sigmoids.
template <WeightType kW, OutputType kO>
KernelLaunch PlanPersistent128x128(int heads, int rows, int multiprocessors, bool gated) {
  const long long tiles =
      static_cast<long long>(heads) * ((rows + PersistentTile::kRows - 1) / PersistentTile::kRows);
  const long long rounds = (tiles + multiprocessors - 1) / multiprocessors;
  KernelLaunch launch;
  launch.function =
      !gated        ? reinterpret_cast<const void*>(Persistent128x128Kernel<false, false, kW, kO>)
      : rounds == 1 ? reinterpret_cast<const void*>(Persistent128x128Kernel<true, true, kW, kO>)
                    : reinterpret_cast<const void*>(Persistent128x128Kernel<false, true, kW, kO>);
  launch.grid = dim3(static_cast<unsigned>((tiles + rounds - 1) / rounds));
  launch.block = dim3(PersistentTile::kThreads);
  launch.smem_bytes = PersistentTile::kSmemBytes;
  return launch;
}
template KernelLaunch PlanPersistent128x128<WeightType::kBf16, OutputType::kBf16>(int, int, int,
                                                                                  bool);
template KernelLaunch PlanPersistent128x128<WeightType::kE4m3, OutputType::kBf16>(int, int, int,
                                                                                  bool);
template KernelLaunch PlanPersistent128x128<WeightType::kBf16, OutputType::kE4m3>(int, int, int,
                                                                                  bool);
template KernelLaunch PlanPersistent128x128<WeightType::kE4m3, OutputType::kE4m3>(int, int, int,
                                                                                  bool);

}  // namespace mla_tail::internal

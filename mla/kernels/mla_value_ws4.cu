// EXPERIMENT (kWgmmaWs4): mla_value_ws.cu with the gate in a fourth warpgroup.
//
// A block (one a multiprocessor) loops over tiles blockIdx.x + n * gridDim.x of (head, 128 rows,
// all 128 columns), numbered head-major so that the blocks running at one time share their
// heads' W_UV in L2. Four warpgroups, handing buffers over shared-memory mbarriers:
//   - the producer copies each K step's W_UV slice [128][64] and latent slice [128][64] with
//     cp.async into a ring of kStages buffers. It waits only for a buffer to be free and signals
//     it full with cp.async.mbarrier.arrive, which fires when its copies land: it never waits
//     for a copy, so every free buffer is always being filled.
//   - two consumers, 64 rows each, wait for a step's buffer, run its four wgmma m64n128k16 on
//     the shared W_UV slice, and free it once those MMAs are done (one step later: each step's
//     MMAs run on while the next buffer is awaited). After a tile's last step they round their
//     sums to bf16 (SPEC.md's v) into the values buffer and go on to the next tile.
//   - the gate warpgroup loads the tile's gate and lengths from global memory while the tile is
//     computed, then gates the values buffer (FP32 sigmoid) and stores the output, coalesced.
// Why: in the block-synchronous kernel (mla_value_wgmma.cu) a buffer is refilled only after
// every thread has passed the next step's barrier, so each step's MMA chain sat on the copy
// path; and during each tile's epilogue (its sigmoids take about as long as two K steps' copies)
// no buffer was freed, so the copies stopped once the ring was full. Here the ring drains
// through the epilogues. Without its MMAs the block-synchronous kernel ran at the copy bandwidth
// (bench/results/2026-11-30-h200/NOTES.md).
//
// Shared layout: the canonical K-major 128-byte swizzle of wgmma (wgmma.cuh) for the operand
// buffers; the values tile with row r's 16-byte word w at word w ^ (r % 8), so that the
// consumers' 4-byte writes (one word of 8 rows a warp) and the gate warpgroup's 16-byte reads
// avoid bank conflicts. No L2 prefetch before the dependency wait (prefetch.cuh): the kernel
// serves tails far above its limit.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mbarrier.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"
#include "mla/kernels/wgmma.cuh"

namespace mla {
namespace {

struct Ws4Tile {
  static constexpr int kStages = 6;
  static constexpr int kStepK = 64;                   // latent values a step: one 128-byte row
  static constexpr int kSteps = kLatentDim / kStepK;  // 8
  static constexpr int kRowBytes = kStepK * 2;
  static constexpr int kRows = 128;                   // two consumer warpgroups of 64
  static constexpr int kCols = kValueDim;             // 128
  static constexpr int kThreads = 4 * 128;  // producer, two consumers, gate
  static constexpr int kConsumerThreads = 256;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kGateThreads = 128;
  // The register file split (launch bounds give 128 a thread): addresses for the producer,
  // 64 accumulators for the consumers, a tile's gate words in flight for the gate warpgroup.
  static constexpr int kProducerRegisters = 56;
  static constexpr int kConsumerRegisters = 176;
  static constexpr int kGateRegisters = 104;
  static constexpr int kWBytes = kCols * kRowBytes;
  static constexpr int kStageBytes = kWBytes + kRows * kRowBytes;
  static constexpr int kValuesRowBytes = kCols * 2;
  static constexpr int kValuesOffset = kStages * kStageBytes;
  static constexpr int kLengthsOffset = kValuesOffset + kRows * kValuesRowBytes;  // [2][kRows]
  static constexpr int kBarriersOffset = kLengthsOffset + 2 * kRows * int(sizeof(int32_t));
  static constexpr int kBarriers = 2 * kStages + 2;  // full[], empty[], values full and empty
  static constexpr int kAlign = 1024;                 // the swizzle's atom
  static constexpr size_t kSmemBytes = kBarriersOffset + kBarriers * sizeof(uint64_t) + kAlign;
  // The producer's copies: thread i moves word i % 8 of rows i / 8 + 16 n, a multiple of 8 rows
  // apart, so one swizzled offset serves all of them.
  static constexpr int kWords = kRowBytes / 16;
  static constexpr int kRowsPerPass = 128 / kWords;    // 16
  static constexpr int kCopies = kRows / kRowsPerPass;  // 8 (W_UV and latent alike)
  // The gate warpgroup: thread i gates word i % 16 of rows i / 16 + 8 n (a warp: two whole
  // rows, 512 contiguous bytes of gate and output).
  static constexpr int kValuesWords = kValuesRowBytes / 16;               // 16
  static constexpr int kGateRowsPerPass = kGateThreads / kValuesWords;    // 8
  static constexpr int kGateWords = kRows / kGateRowsPerPass;             // 16

  static __device__ __forceinline__ int ValuesWord(int r, int w) {
    return r * kValuesRowBytes + 16 * (w ^ (r % 8));
  }
  static_assert(kSmemBytes <= 227 * 1024, "one block a multiprocessor");
  static_assert(kStageBytes % kAlign == 0 && kWBytes % kAlign == 0, "tiles on atom boundaries");
  static_assert(128 * kProducerRegisters + kConsumerThreads * kConsumerRegisters +
                        kGateThreads * kGateRegisters <=
                    65536,
                "the warpgroups' registers fit in the register file");
};

__global__ void __launch_bounds__(Ws4Tile::kThreads, 1)
    MlaValueWs4Kernel(const MlaValueParams p) {
  using T = Ws4Tile;
  extern __shared__ uint4 smem_words[];
  const uint32_t smem_raw = device::SmemAddress(smem_words);
  const uint32_t smem_base = (smem_raw + T::kAlign - 1) & ~uint32_t{T::kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);
  uint8_t* const values = smem + T::kValuesOffset;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + T::kBarriersOffset);
  uint64_t* const empty = full + T::kStages;
  uint64_t* const values_full = empty + T::kStages;
  uint64_t* const values_empty = values_full + 1;

  if (threadIdx.x == 0) {
    for (int s = 0; s < T::kStages; ++s) {
      device::MbarrierInit(&full[s], 128);
      device::MbarrierInit(&empty[s], T::kConsumerWarps);
    }
    device::MbarrierInit(values_full, T::kConsumerThreads);
    device::MbarrierInit(values_empty, T::kGateThreads);
  }
  __syncthreads();

  const int row_tiles = (p.rows + T::kRows - 1) / T::kRows;
  const int tiles = (p.heads * row_tiles - 1 - static_cast<int>(blockIdx.x)) / gridDim.x + 1;
  struct Tile {
    int head, t0;
  };
  auto tile_at = [&](int i) {
    const int j = blockIdx.x + i * gridDim.x;
    return Tile{j / row_tiles, j % row_tiles * T::kRows};
  };
  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  if (warpgroup == 0) {
    // ---- Producer ----
    device::WarpgroupRegistersDown<T::kProducerRegisters>();
    const int copy_row = threadIdx.x / T::kWords;
    const int copy_word = threadIdx.x % T::kWords;
    const int copy_dst = copy_row * T::kRowBytes + 16 * (copy_word ^ (copy_row % 8));
    auto copy_w = [&](const Tile& c, int step, int stage) {
      uint8_t* dst = smem + stage * T::kStageBytes + copy_dst;
      const bf16* src = p.w_uv + c.head * p.w_head_stride + copy_row * p.w_row_stride +
                        step * T::kStepK + 8 * copy_word;
#pragma unroll
      for (int n = 0; n < T::kCopies; ++n) {
        device::CopyAsync16(dst + n * T::kRowsPerPass * T::kRowBytes,
                            src + n * T::kRowsPerPass * p.w_row_stride, true);
      }
    };
    auto copy_latent = [&](const Tile& c, int step, int stage) {
      uint8_t* dst = smem + stage * T::kStageBytes + T::kWBytes + copy_dst;
#pragma unroll
      for (int n = 0; n < T::kCopies; ++n) {
        // Rows past the end are not copied: their products land in output rows never stored.
        const int t = c.t0 + copy_row + n * T::kRowsPerPass;
        if (t < p.rows) {
          device::CopyAsync16(dst + n * T::kRowsPerPass * T::kRowBytes,
                              p.latent + t * p.latent_row_stride + c.head * kLatentDim +
                                  step * T::kStepK + 8 * copy_word,
                              true);
        }
      }
    };

    // W_UV is no upstream kernel's output: the first buffers' share goes before the wait.
    const Tile first = tile_at(0);
    constexpr int kEarly = T::kStages < T::kSteps ? T::kStages : T::kSteps;
#pragma unroll
    for (int step = 0; step < kEarly; ++step) copy_w(first, step, step);
    device::GridDependencyWait();

    int stage = 0;
    uint32_t phase = 0;  // the n-th fill of a buffer is its phase n
    for (int i = 0; i < tiles; ++i) {
      const Tile tile = tile_at(i);
#pragma unroll 1
      for (int step = 0; step < T::kSteps; ++step) {
        if (i > 0 || step >= T::kStages) device::MbarrierWait(&empty[stage], (phase - 1) & 1);
        if (i > 0 || step >= kEarly) copy_w(tile, step, stage);
        copy_latent(tile, step, stage);
        device::MbarrierArriveOnCopies(&full[stage]);
        if (++stage == T::kStages) {
          stage = 0;
          ++phase;
        }
      }
    }
    // Every copy is issued: dependents may launch (they wait for this grid's end to read).
    device::LaunchDependents();
    device::CopyAsyncWait<0>();
    return;
  }

  if (warpgroup == 3) {
    // ---- Gate ----
    device::WarpgroupRegistersDown<T::kGateRegisters>();
    device::GridDependencyWait();
    const int k = threadIdx.x % 128;
    const int word = k % T::kValuesWords;
    const int row0 = k / T::kValuesWords;
    int32_t* const lengths = reinterpret_cast<int32_t*>(smem + T::kLengthsOffset);
    for (int i = 0; i < tiles; ++i) {
      const Tile tile = tile_at(i);
      // The tile's gate words and one length a thread, in flight while the tile is computed.
      uint4 gate[T::kGateWords];
#pragma unroll
      for (int n = 0; n < T::kGateWords; ++n) {
        const int t = min(tile.t0 + row0 + T::kGateRowsPerPass * n, p.rows - 1);
        // asm volatile: all 16 loads issue here, before the wait, not at their use.
        gate[n] = device::LoadWeight16(p.gate + t * p.gate_row_stride + tile.head * kValueDim +
                                       8 * word);
      }
      const int length = p.lengths[min(tile.t0 + k, p.rows - 1) / p.q];
      int32_t* const tile_lengths = lengths + (i & 1) * T::kRows;
      tile_lengths[k] = length;
      // Publishes the lengths; a thread is never two tiles ahead of another, so the other
      // buffer's readers are done.
      device::NamedBarrier(1, T::kGateThreads);
      device::MbarrierWait(values_full, i & 1);
#pragma unroll
      for (int n = 0; n < T::kGateWords; ++n) {
        const int r = row0 + T::kGateRowsPerPass * n;
        const uint4 v = *reinterpret_cast<const uint4*>(values + T::ValuesWord(r, word));
        float x[8];
        uint32_t gates[4] = {gate[n].x, gate[n].y, gate[n].z, gate[n].w};
        const uint32_t vw[4] = {v.x, v.y, v.z, v.w};
        bool active[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = device::Bf16x2ToFloat2(vw[e]);
          x[2 * e] = f.x;
          x[2 * e + 1] = f.y;
          active[e] = tile_lengths[r] > 0;
        }
        uint32_t out[4];
        device::GatePairs(x, gates, active, out);
        const int t = tile.t0 + r;
        if (t < p.rows) {
          *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + tile.head * kValueDim +
                                    8 * word) = make_uint4(out[0], out[1], out[2], out[3]);
        }
      }
      device::MbarrierArrive(values_empty);
    }
    return;
  }

  // ---- Consumers ----
  device::WarpgroupRegistersUp<T::kConsumerRegisters>();
  const int consumer = warpgroup - 1;  // its 64 rows of the tile
  const int warp = threadIdx.x % 128 / 32;
  const uint64_t a_desc0 =
      device::SmemDescriptor(smem_base + T::kWBytes + consumer * 64 * T::kRowBytes);
  const uint64_t b_desc0 = device::SmemDescriptor(smem_base);

  int stage = 0;
  uint32_t phase = 0;
  for (int i = 0; i < tiles; ++i) {
    float acc[T::kCols / 2];
#pragma unroll
    for (int j = 0; j < T::kCols / 2; ++j) acc[j] = 0.0f;

    int previous = 0;  // the buffer of the step before
#pragma unroll 1
    for (int step = 0; step < T::kSteps; ++step) {
      device::MbarrierWait(&full[stage], phase & 1);
      device::FenceProxyAsyncShared();  // cp.async wrote it through the generic proxy
      const uint64_t stage_offset = static_cast<uint64_t>(stage * T::kStageBytes) >> 4;
      device::FenceAccumulators(acc);
      device::WgmmaFence();
#pragma unroll
      for (int k = 0; k < T::kStepK / 16; ++k) {
        device::Wgmma64xN(acc, a_desc0 + stage_offset + 2 * k, b_desc0 + stage_offset + 2 * k);
      }
      device::WgmmaCommit();
      device::WgmmaWait<1>();  // the step before is done: free its buffer
      device::FenceAccumulators(acc);
      if (step > 0) {
        __syncwarp();
        if (lane == 0) device::MbarrierArrive(&empty[previous]);
      }
      previous = stage;
      if (++stage == T::kStages) {
        stage = 0;
        ++phase;
      }
    }
    device::WgmmaWait<0>();
    device::FenceAccumulators(acc);
    __syncwarp();
    if (lane == 0) device::MbarrierArrive(&empty[previous]);

    // v = bf16(sum) into the values buffer, once the gate warpgroup is done with the tile
    // before. Accumulator 4j + e: row 16 * warp + group (+8 for e >= 2) of the consumer's 64,
    // column 8j + 2 * quarter + (e & 1).
    if (i > 0) device::MbarrierWait(values_empty, (i - 1) & 1);
    const int group = lane / 4;
    const int quarter = lane % 4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 64 * consumer + 16 * warp + 8 * half + group;
#pragma unroll
      for (int j = 0; j < T::kCols / 8; ++j) {
        const __nv_bfloat162 v =
            __floats2bfloat162_rn(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
        *reinterpret_cast<__nv_bfloat162*>(values + T::ValuesWord(row, j) + 4 * quarter) = v;
      }
    }
    device::MbarrierArrive(values_full);
  }
}

}  // namespace

cudaError_t PrepareMlaValueWs4() {
  return cudaFuncSetAttribute(MlaValueWs4Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(Ws4Tile::kSmemBytes));
}

const void* MlaValueWs4KernelAddress() { return reinterpret_cast<const void*>(MlaValueWs4Kernel); }

cudaError_t LaunchMlaValueWs4(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
  int device = 0;
  int multiprocessors = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) {
    e = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
  }
  if (e != cudaSuccess) return e;
  const long long tiles =
      static_cast<long long>(p.heads) * ((p.rows + Ws4Tile::kRows - 1) / Ws4Tile::kRows);
  const dim3 grid(static_cast<unsigned>(std::min<long long>(tiles, multiprocessors)));
  return LaunchWithPdl(MlaValueWs4Kernel, grid, dim3(Ws4Tile::kThreads), Ws4Tile::kSmemBytes,
                       stream, pdl, p);
}

}  // namespace mla

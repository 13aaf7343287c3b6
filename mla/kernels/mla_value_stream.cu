// MlaValueStream: the fused W_UV projection and sigmoid gate for large batches, with the head's
// W_UV held in shared memory while its latent streams past.
//
// Why: the tiled kernels re-read W_UV from L2 for every 64-row tile (8 x 16.8 MB on top of
// 134 MB of latent at H = 128 x 1024 rows), and the BMM path writes the values to memory and
// reads them back. Here every byte of latent, gate and output crosses the memory system once,
// and W_UV once per block.
//
// Grid: heads x splits blocks, one per multiprocessor (225 KB of shared memory); block (s, h)
// loads head h's W_UV (128 columns x 512, 128 KB) once, with every thread, before the dependency
// wait (no upstream kernel writes weights). Its two warpgroups ("workers") then each take a
// contiguous range of the head's 64-row tiles and run their own pipeline: kRing stages of
// 64 rows x 64 latent values (8 KB) copied with cp.async by the worker's 128 threads (an earlier
// TMA-fed version, reverted at 9b5befc, moved about 8 KB a block per microsecond), one wgmma
// m64n128k16 per 16 latent values. Two workers keep the tensor cores busy while the other
// rounds, gates and stores a tile: the accurate FP32 sigmoid of 64 elements a thread takes about
// as long as the tile's MMAs.
//
// Epilogue per tile: each thread's gate words and row lengths are loaded into registers when the
// tile starts (rows clamped, so the loads need no branch and are waited for only at first use),
// then the accumulators are rounded to bf16, gated and stored from registers.
//
// Operand layout in shared memory: the canonical K-major 128-byte swizzle (wgmma.cuh). Latent
// rows past the last row are not copied: their products land in output rows never stored.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/wgmma.cuh"

namespace mla {
namespace {

constexpr int kWorkers = 2;                      // warpgroups a block, one pipeline each
constexpr int kWorkerThreads = 128;              // one warpgroup
constexpr int kThreads = kWorkers * kWorkerThreads;
constexpr int kRows = 64;                        // rows of a tile: wgmma's m
constexpr int kStepK = 64;                       // latent values per step: one 128-byte row
constexpr int kSteps = kLatentDim / kStepK;      // 8 steps a tile
constexpr int kRowBytes = kStepK * 2;            // 128
constexpr int kWords = kRowBytes / 16;           // 16-byte words a row: 8
constexpr int kAlign = 1024;                     // swizzle atom
constexpr int kWSliceBytes = kValueDim * kRowBytes;  // W_UV of one step: 128 rows x 128 bytes
constexpr int kWBytes = kSteps * kWSliceBytes;       // 128 KB
constexpr int kStageBytes = kRows * kRowBytes;       // 8 KB
constexpr int kRingOffset = kWBytes;
constexpr int kWorkerRowsPerPass = kWorkerThreads / kWords;  // 16 latent rows a copy pass
constexpr int kBlockRowsPerPass = kThreads / kWords;         // 32 W_UV rows a copy pass
static_assert(kWorkerRowsPerPass % 8 == 0 && kBlockRowsPerPass % 8 == 0,
              "one swizzled offset serves all of a thread's copies");

// The worker's 128 threads, apart from the other worker (named barriers 1 and 2; 0 is
// __syncthreads).
__device__ __forceinline__ void WorkerSync(int worker) {
  asm volatile("bar.sync %0, %1;" ::"r"(1 + worker), "n"(kWorkerThreads) : "memory");
}

// kRing: stages of a worker's pipeline. kPrefetchTiles: how many of its tiles ahead a worker has
// the bulk copy engine bring latent and gate rows into L2 (0: none). kAMode: EXPERIMENT, how the
// latent reaches the MMA: 0 shared memory (proxy fence a step), 1 shared memory without the fence
// (unsafe, to measure it), 2 registers through ldmatrix.
template <int kRing, int kPrefetchTiles, int kAMode = 0>
struct StreamConfig {
  static constexpr int kRingBytes = kRing * kStageBytes;  // a worker's ring
  static constexpr size_t kSmemBytes = kWBytes + kWorkers * kRingBytes + kAlign;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");
};

template <int kRing, int kPrefetchTiles, int kAMode>
__global__ void __launch_bounds__(kThreads, 1) MlaValueStreamKernel(const MlaValueParams p) {
  constexpr int kRingBytes = StreamConfig<kRing, kPrefetchTiles, kAMode>::kRingBytes;
  extern __shared__ uint4 smem_words[];
  const uint32_t smem_raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_words));
  const uint32_t smem_base = (smem_raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);

  const int head = blockIdx.y;
  const int worker = threadIdx.x / kWorkerThreads;
  const int tid = threadIdx.x % kWorkerThreads;
  // This worker's tiles [tile_begin, tile_end) of the head's, split evenly over its workers.
  const int tiles = (p.rows + kRows - 1) / kRows;
  const int workers = gridDim.x * kWorkers;
  const int index = blockIdx.x * kWorkers + worker;
  const int tile_begin = static_cast<int>(int64_t{index} * tiles / workers);
  const int tile_end = static_cast<int>(int64_t{index + 1} * tiles / workers);
  const int steps = (tile_end - tile_begin) * kSteps;

  // L2 prefetch of tile `tile`'s rows, one bulk prefetch a row: latent (1 KB) by threads 0-63,
  // gate (256 bytes) by threads 64-127 of the worker.
  auto prefetch_tile = [&](int tile) {
    if (kPrefetchTiles == 0 || tile >= tile_end) return;
    const int t = tile * kRows + tid % kRows;
    if (t >= p.rows) return;
    if (tid < kRows) {
      device::PrefetchBulkL2(p.latent + t * p.latent_row_stride + head * kLatentDim,
                             kLatentDim * sizeof(bf16));
    } else {
      device::PrefetchBulkL2(p.gate + t * p.gate_row_stride + head * kValueDim,
                             kValueDim * sizeof(bf16));
    }
  };
  if (kPrefetchTiles > 0 && threadIdx.x < kValueDim) {
    device::PrefetchBulkL2(p.w_uv + head * p.w_head_stride + threadIdx.x * p.w_row_stride,
                           kLatentDim * sizeof(bf16));
  }

  // W_UV, by all threads: word threadIdx % 8 of rows threadIdx / 8 + 32 n of every step's slice.
  {
    const int row = threadIdx.x / kWords;
    const int word = threadIdx.x % kWords;
    const bf16* src = p.w_uv + head * p.w_head_stride + row * p.w_row_stride + 8 * word;
    uint8_t* dst = smem + row * kRowBytes + 16 * (word ^ (row % 8));
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
#pragma unroll
      for (int n = 0; n < kValueDim / kBlockRowsPerPass; ++n) {
        device::CopyAsync16(dst + s * kWSliceBytes + n * kBlockRowsPerPass * kRowBytes,
                            src + n * kBlockRowsPerPass * p.w_row_stride + s * kStepK, true);
      }
    }
    device::CopyAsyncCommit();
  }
  device::GridDependencyWait();
#pragma unroll
  for (int i = 0; i < kPrefetchTiles; ++i) prefetch_tile(tile_begin + i);

  // The worker's latent copies of `step` (of its sequence), one commit group a step, empty past
  // the end so that the count of groups in flight stays fixed.
  const int copy_row = tid / kWords;
  const int copy_word = tid % kWords;
  const int copy_dst = copy_row * kRowBytes + 16 * (copy_word ^ (copy_row % 8));
  uint8_t* ring = smem + kRingOffset + worker * kRingBytes;
  const bf16* latent_head = p.latent + head * kLatentDim + 8 * copy_word;
  auto copy_latent = [&](int step) {
    if (step < steps) {
      const int t0 = (tile_begin + step / kSteps) * kRows;
      const int k = step % kSteps;
      uint8_t* dst = ring + (step % kRing) * kStageBytes + copy_dst;
#pragma unroll
      for (int n = 0; n < kRows / kWorkerRowsPerPass; ++n) {
        const int t = t0 + copy_row + n * kWorkerRowsPerPass;
        if (t < p.rows) {
          device::CopyAsync16(dst + n * kWorkerRowsPerPass * kRowBytes,
                              latent_head + t * p.latent_row_stride + k * kStepK, true);
        }
      }
      // The worker's last read of upstream-written latent is in flight: dependents may launch.
      if (step == steps - 1) device::LaunchDependents();
    }
    device::CopyAsyncCommit();
  };
#pragma unroll
  for (int step = 0; step < kRing - 1; ++step) copy_latent(step);
  // W_UV's group, the oldest, is complete; the barrier publishes every thread's part of it.
  device::CopyAsyncWait<kRing - 1>();
  device::FenceProxyAsyncShared();
  __syncthreads();

  const int lane = tid % 32;
  const int warp = tid / 32;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const uint64_t a_desc0 = device::SmemDescriptor(smem_base + kRingOffset + worker * kRingBytes);
  const uint64_t b_desc0 = device::SmemDescriptor(smem_base);
  // ldmatrix: lane l reads row 16 * warp + 8 * ((l / 8) % 2) + l % 8 of the stage, 16-byte word
  // 2 kk + l / 16 of the k16 slice kk (swizzled by the row, whose % 8 is l % 8).
  const uint32_t a_lane = smem_base + kRingOffset + worker * kRingBytes +
                          (16 * warp + 8 * ((lane / 8) % 2) + lane % 8) * kRowBytes;

  int step = 0;
#pragma unroll 1
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int t0 = tile * kRows;
    prefetch_tile(tile + kPrefetchTiles);

    // Gate words and lengths of this thread's rows 16 * warp + group (+8), columns 8j + 2q, +1.
    uint32_t gate_words[2][16];
    bool active[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = t0 + 16 * warp + 8 * half + group;
      const int row = min(t, p.rows - 1);
      active[half] = t < p.rows && p.lengths[row / p.q] > 0;
      const bf16* gate_row = p.gate + row * p.gate_row_stride + head * kValueDim + 2 * quarter;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        gate_words[half][j] = *reinterpret_cast<const uint32_t*>(gate_row + 8 * j);
      }
    }

    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
#pragma unroll 1
    for (int k = 0; k < kSteps; ++k, ++step) {
      // Group `step` is complete; the barrier publishes the worker's copies and tells that every
      // thread finished step - 1's MMAs, whose stage the copies issued next overwrite.
      device::CopyAsyncWait<kRing - 2>();
      if (kAMode == 0) device::FenceProxyAsyncShared();
      WorkerSync(worker);
      copy_latent(step + kRing - 1);

      // Descriptor addresses are in 16-byte units; each k16 slice is 32 bytes (2) on.
      const uint64_t a_desc = a_desc0 + (((step % kRing) * kStageBytes) >> 4);
      const uint64_t b_desc = b_desc0 + ((k * kWSliceBytes) >> 4);
      uint32_t a[kStepK / 16][4];
      if (kAMode == 2) {
#pragma unroll
        for (int kk = 0; kk < kStepK / 16; ++kk) {
          device::LoadMatrixX4(a[kk], a_lane + (step % kRing) * kStageBytes +
                                          16 * ((2 * kk + lane / 16) ^ (lane % 8)));
        }
      }
      device::FenceAccumulators(acc);
      device::WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kStepK / 16; ++kk) {
        if (kAMode == 2) {
          device::Wgmma64x128RegA(acc, a[kk], b_desc + 2 * kk);
        } else {
          device::Wgmma64x128(acc, a_desc + 2 * kk, b_desc + 2 * kk);
        }
      }
      device::WgmmaCommit();
      device::WgmmaWaitAll();
      device::FenceAccumulators(acc);
    }

    // Accumulator 4j + e: row 16 * warp + group (+8 for e >= 2), column 8j + 2q + (e & 1).
    // A row's 16 pairs gated at once.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float v[32];
      bool pair_active[16];
      uint32_t out[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        v[2 * j] = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half]));
        v[2 * j + 1] = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half + 1]));
        pair_active[j] = active[half];
      }
      device::GatePairs(v, gate_words[half], pair_active, out);
      const int t = t0 + 16 * warp + 8 * half + group;
      if (t >= p.rows) continue;
      bf16* out_row = p.output + t * p.output_row_stride + head * kValueDim + 2 * quarter;
#pragma unroll
      for (int j = 0; j < 16; ++j) *reinterpret_cast<uint32_t*>(out_row + 8 * j) = out[j];
    }
  }
}

int MultiprocessorCount() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return count;
}

// EXPERIMENT: the configuration from MLA_TAIL_EXPERIMENT_STREAM ("ring:prefetch"), default 6:0.
struct StreamChoice {
  const void* kernel;
  size_t smem;
};
template <int kRing, int kPrefetchTiles, int kAMode = 0>
StreamChoice Choice() {
  return {reinterpret_cast<const void*>(MlaValueStreamKernel<kRing, kPrefetchTiles, kAMode>),
          StreamConfig<kRing, kPrefetchTiles, kAMode>::kSmemBytes};
}
const StreamChoice& Chosen() {
  static const StreamChoice chosen = [] {
    const char* e = std::getenv("MLA_TAIL_EXPERIMENT_STREAM");
    const std::string v = e != nullptr ? e : "6:0";
    if (v == "6:0:nofence") return Choice<6, 0, 1>();
    if (v == "6:0:regs") return Choice<6, 0, 2>();
    if (v == "4:0:regs") return Choice<4, 0, 2>();
    if (v == "6:1:regs") return Choice<6, 1, 2>();
    return Choice<6, 0>();
  }();
  return chosen;
}

}  // namespace

cudaError_t PrepareMlaValueStream() {
  const StreamChoice& c = Chosen();
  return cudaFuncSetAttribute(c.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(c.smem));
}

const void* MlaValueStreamKernelAddress() { return Chosen().kernel; }

cudaError_t LaunchMlaValueStream(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
  const int sms = MultiprocessorCount();
  if (sms == 0) return cudaErrorInvalidDevice;
  // As many blocks a head as fill the multiprocessors once, and no more workers than tiles.
  const int tiles = (p.rows + kRows - 1) / kRows;
  const int splits = std::min((tiles + kWorkers - 1) / kWorkers, std::max(1, sms / p.heads));
  const StreamChoice& c = Chosen();
  return LaunchWithPdl(reinterpret_cast<void (*)(MlaValueParams)>(const_cast<void*>(c.kernel)),
                       dim3(splits, p.heads), dim3(kThreads), c.smem, stream, pdl, p);
}

}  // namespace mla

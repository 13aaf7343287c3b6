// MlaValueSplitK: the fused W_UV projection and gate for grids narrower than the GPU (a few
// heads, up to a few hundred rows), where a block that reads all 512 latent values of its tile
// spends most of its time waiting for them. A cluster of kSplit blocks shares one 64 x 32 output
// tile: block `part` (its rank in the cluster) multiplies the quarter [128 part, 128 part + 128)
// of the latent axis, so each block's latent load is a quarter as long and four times as many
// blocks load at once.
//
// Each block: its W_UV slices (2 steps of [32 columns][64 latent values]) copied before the
// dependency wait; after it, the latent slices and, into registers, the gate and lengths of the
// 16 rows it finishes; one warpgroup's wgmma m64n32k16 over its steps. Its FP32 partial sums go
// to its own shared memory; after a cluster barrier, block `part` adds the kSplit partials of
// rows [16 part, 16 part + 16) in rank order (deterministic: the same bits every run), rounds to
// bf16, gates and stores them. A second cluster barrier keeps every block's shared memory alive
// until the others have read it.
//
// Operand layout as MlaValueWgmma's (mla_value_wgmma.cu): K-major rows of 128 bytes with the
// 128-byte swizzle, tiles on 1024-byte boundaries. The sums differ from the single-block
// kernels' only in the order of the FP32 additions.

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/wgmma.cuh"

namespace mla {
namespace {

namespace cg = cooperative_groups;

constexpr int kSplit = 4;                                   // blocks a tile, a cluster
constexpr int kStepK = 64;                                  // latent values a step
constexpr int kBlockSteps = kLatentDim / kStepK / kSplit;   // 2
constexpr int kBlockK = kBlockSteps * kStepK;               // 128
constexpr int kRowBytes = kStepK * 2;                       // 128
constexpr int kWords = kRowBytes / 16;                      // 8
constexpr int kAlign = 1024;
constexpr int kRows = 64;
constexpr int kCols = 32;
constexpr int kThreads = 128;
constexpr int kWBytes = kCols * kRowBytes;                  // 4 KB
constexpr int kLatentBytes = kRows * kRowBytes;             // 8 KB
constexpr int kStageBytes = kWBytes + kLatentBytes;
constexpr int kPartialStride = kCols + 4;                   // floats: rows 16 bytes apart in banks
constexpr int kPartialsOffset = kBlockSteps * kStageBytes;
constexpr size_t kSmemBytes = kPartialsOffset + kRows * kPartialStride * sizeof(float) + kAlign;
constexpr int kSliceRows = kRows / kSplit;                  // 16 rows finished by each block
constexpr int kRowsPerPass = kThreads / kWords;             // 16
constexpr int kWCopies = kCols / kRowsPerPass;              // 2
constexpr int kLatentCopies = kRows / kRowsPerPass;         // 4
// The epilogue: thread i finishes 4 columns of one row of its block's slice.
constexpr int kColumnsPerThread = 4;
static_assert(kSliceRows * kCols == kThreads * kColumnsPerThread, "one row quad a thread");
static_assert(kStageBytes % kAlign == 0 && kWBytes % kAlign == 0, "tiles on atom boundaries");
static_assert(kSmemBytes <= 48 * 1024, "no shared-memory opt-in");

__global__ void __cluster_dims__(kSplit, 1, 1) __launch_bounds__(kThreads)
    MlaValueSplitKKernel(const MlaValueParams p) {
  extern __shared__ uint4 smem_words[];
  const uint32_t smem_raw = device::SmemAddress(smem_words);
  const uint32_t smem_base = (smem_raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);
  cg::cluster_group cluster = cg::this_cluster();

  const int part = static_cast<int>(cluster.block_rank());
  const int head = blockIdx.y;
  const int column0 = static_cast<int>(blockIdx.x) / kSplit * kCols;
  const int t0 = blockIdx.z * kRows;
  const int k0 = part * kBlockK;

  const int copy_row = threadIdx.x / kWords;
  const int copy_word = threadIdx.x % kWords;
  const int copy_dst = copy_row * kRowBytes + 16 * (copy_word ^ (copy_row % 8));
#pragma unroll
  for (int step = 0; step < kBlockSteps; ++step) {
    uint8_t* dst = smem + step * kStageBytes + copy_dst;
    const bf16* src = p.w_uv + head * p.w_head_stride + (column0 + copy_row) * p.w_row_stride +
                      k0 + step * kStepK + 8 * copy_word;
#pragma unroll
    for (int n = 0; n < kWCopies; ++n) {
      device::CopyAsync16(dst + n * kRowsPerPass * kRowBytes,
                          src + n * kRowsPerPass * p.w_row_stride, true);
    }
  }
  device::PrefetchBlockInputsL2(p, head, t0, kRows, k0, kBlockK, column0, kCols);
  device::GridDependencyWait();

#pragma unroll
  for (int step = 0; step < kBlockSteps; ++step) {
    uint8_t* dst = smem + step * kStageBytes + kWBytes + copy_dst;
#pragma unroll
    for (int n = 0; n < kLatentCopies; ++n) {
      // Rows past the end are not copied: their products land in rows never stored.
      const int t = t0 + copy_row + n * kRowsPerPass;
      if (t < p.rows) {
        device::CopyAsync16(dst + n * kRowsPerPass * kRowBytes,
                            p.latent + t * p.latent_row_stride + head * kLatentDim + k0 +
                                step * kStepK + 8 * copy_word,
                            true);
      }
    }
    device::CopyAsyncCommit();
  }
  // The epilogue's gate words and length, loaded while the latent lands.
  const int out_row = part * kSliceRows + threadIdx.x / (kCols / kColumnsPerThread);
  const int out_col = threadIdx.x % (kCols / kColumnsPerThread) * kColumnsPerThread;
  const int out_t = t0 + out_row;
  uint2 gate_bits = make_uint2(0, 0);
  int32_t length = 0;
  if (out_t < p.rows) {
    gate_bits = *reinterpret_cast<const uint2*>(p.gate + out_t * p.gate_row_stride +
                                                head * kValueDim + column0 + out_col);
    length = p.lengths[out_t / p.q];
  }
  device::LaunchDependents();

  const uint64_t a_desc0 = device::SmemDescriptor(smem_base + kWBytes);
  const uint64_t b_desc0 = device::SmemDescriptor(smem_base);
  float acc[kCols / 2];
#pragma unroll
  for (int j = 0; j < kCols / 2; ++j) acc[j] = 0.0f;
#pragma unroll
  for (int step = 0; step < kBlockSteps; ++step) {
    if (step == 0) {
      device::CopyAsyncWait<kBlockSteps - 1>();
    } else {
      device::CopyAsyncWait<0>();
    }
    device::FenceProxyAsyncShared();
    __syncthreads();
    const uint64_t stage_offset = static_cast<uint64_t>(step * kStageBytes) >> 4;
    device::FenceAccumulators(acc);
    device::WgmmaFence();
#pragma unroll
    for (int k = 0; k < kStepK / 16; ++k) {
      device::Wgmma64xN(acc, a_desc0 + stage_offset + 2 * k, b_desc0 + stage_offset + 2 * k);
    }
    device::WgmmaCommit();
    if (step + 1 < kBlockSteps) {
      device::WgmmaWait<1>();
    } else {
      device::WgmmaWait<0>();
    }
    device::FenceAccumulators(acc);
  }

  // Accumulator 4j + e: row 16 * warp + group (+8 for e >= 2), column 8j + 2 * quarter + (e & 1).
  float* partials = reinterpret_cast<float*>(smem + kPartialsOffset);
  {
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = 16 * warp + 8 * half + lane / 4;
        *reinterpret_cast<float2*>(partials + row * kPartialStride + 8 * j + 2 * (lane % 4)) =
            make_float2(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
      }
    }
  }
  cluster.sync();  // every block's partials written and visible to the cluster
  float v[kColumnsPerThread];
  {
    const float4 first = *reinterpret_cast<const float4*>(
        cluster.map_shared_rank(partials, 0) + out_row * kPartialStride + out_col);
    v[0] = first.x;
    v[1] = first.y;
    v[2] = first.z;
    v[3] = first.w;
#pragma unroll
    for (int rank = 1; rank < kSplit; ++rank) {
      const float4 x = *reinterpret_cast<const float4*>(
          cluster.map_shared_rank(partials, rank) + out_row * kPartialStride + out_col);
      v[0] += x.x;
      v[1] += x.y;
      v[2] += x.z;
      v[3] += x.w;
    }
  }
  cluster.sync();  // no block leaves while another still reads its partials
  if (out_t >= p.rows) return;
#pragma unroll
  for (int i = 0; i < kColumnsPerThread; ++i) v[i] = __bfloat162float(__float2bfloat16_rn(v[i]));
  const uint32_t gates[2] = {gate_bits.x, gate_bits.y};
  const bool active[2] = {length > 0, length > 0};
  uint32_t gated[2];
  device::GatePairs<2>(v, gates, active, gated);
  *reinterpret_cast<uint2*>(p.output + out_t * p.output_row_stride + head * kValueDim + column0 +
                            out_col) = make_uint2(gated[0], gated[1]);
}

}  // namespace

KernelLaunch PlanMlaValueSplitK(int heads, int rows) {
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(&MlaValueSplitKKernel);
  launch.grid = dim3(kSplit * (kValueDim / kCols), heads, (rows + kRows - 1) / kRows);
  launch.block = dim3(kThreads);
  launch.smem_bytes = kSmemBytes;
  return launch;
}

cudaError_t PrepareMlaValueSplitK() { return LoadKernel(MlaValueSplitKKernel, kSmemBytes); }

}  // namespace mla

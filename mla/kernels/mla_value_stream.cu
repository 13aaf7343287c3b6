// MlaValueStream: the fused W_UV projection and sigmoid gate for large batches, with W_UV held
// in shared memory while the latent streams past it.
//
// One 128-thread block (one warpgroup) per multiprocessor, persistent: the work is (head, 64-row
// tile) units in head-major order, and block b takes a contiguous range of them, so it loads a
// head's whole W_UV (128 columns x 512, 128 KB) into shared memory once per head it meets
// (one or two), not once per row tile as the tiled kernels do. The latent tiles stream through a
// ring of kRing stages of 64 rows x 64 latent values (8 KB), brought by TMA (a 3-D tensor map
// {512, heads, rows}; rows past the end arrive as zeros), each stage completing an mbarrier.
// Thread 0 issues every copy; after the warpgroup's wgmma m64n128k16 steps on a stage are done,
// it refills that stage with the step kRing ahead, across unit boundaries.
//
// Every byte of latent, gate and output crosses the memory system once, W_UV once per block:
// what the BMM path (values written and read back) and the tiled kernels (W_UV re-read per row
// tile) cannot do.
//
// Epilogue per unit: each thread's gate words and row lengths are loaded into registers when the
// unit starts, so their latency hides behind its eight K steps; the accumulators are rounded to
// bf16, gated, and stored from registers.
//
// TMA lands each tile in the canonical K-major 128-byte swizzle of wgmma (16-byte word w of row r
// at w ^ (r % 8), 1024-byte atoms), the layout MlaValueWgmma builds with cp.async.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"

namespace mla {
namespace {

constexpr int kThreads = 128;                // one warpgroup
constexpr int kRows = 64;                    // rows of a unit: wgmma's m
constexpr int kStepK = 64;                   // latent values per step: one 128-byte row
constexpr int kSteps = kLatentDim / kStepK;  // 8 steps a unit
constexpr int kRing = 8;                     // latent stages in flight
constexpr int kAlign = 1024;
constexpr int kWSliceBytes = kValueDim * kStepK * 2;  // W_UV of one step: 128 rows x 128 bytes
constexpr int kWBytes = kSteps * kWSliceBytes;        // 128 KB
constexpr int kStageBytes = kRows * kStepK * 2;       // 8 KB
constexpr int kRingOffset = kWBytes;
constexpr int kBarrierOffset = kRingOffset + kRing * kStageBytes;
constexpr size_t kSmemBytes = kBarrierOffset + (kRing + 1) * 8 + kAlign;
static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");

__device__ __forceinline__ uint64_t SmemDescriptor(uint32_t smem_address) {
  return static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{kAlign >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void BarrierInit(uint32_t barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(count) : "memory");
}
__device__ __forceinline__ void BarrierExpectBytes(uint32_t barrier, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier),
               "r"(bytes)
               : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed.
__device__ __forceinline__ void BarrierWait(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}" ::"r"(barrier),
      "r"(parity)
      : "memory");
}
// A 3-D box of `map` at (c0, c1, c2) into shared memory, completing `barrier`'s transaction.
__device__ __forceinline__ void TmaLoad3d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                          int c2, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(barrier)
      : "memory");
}
// The 128 threads of the block, without the other barriers' count.
__device__ __forceinline__ void WarpgroupSync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaWaitAll() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
template <int kN>
__device__ __forceinline__ void FenceAccumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define MLA_WG_D8(i)                                                                       \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),         \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// D[64 x 128] += A[64 x 16] * B[128 x 16]^T, both K-major in shared memory; fp32 accumulators.
__device__ __forceinline__ void Wgmma64x128(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}"
      : MLA_WG_D8(0), MLA_WG_D8(8), MLA_WG_D8(16), MLA_WG_D8(24), MLA_WG_D8(32), MLA_WG_D8(40),
        MLA_WG_D8(48), MLA_WG_D8(56)
      : "l"(a), "l"(b), "r"(1));
}

#undef MLA_WG_D8

__global__ void __launch_bounds__(kThreads, 1)
    MlaValueStreamKernel(const __grid_constant__ MlaValueStreamParams sp) {
  const MlaValueParams& p = sp.p;
  extern __shared__ uint4 smem_words[];
  const uint32_t smem_raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_words));
  const uint32_t smem = (smem_raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  const uint32_t w_barrier = smem + kBarrierOffset + kRing * 8;
  auto full_barrier = [&](int stage) { return smem + kBarrierOffset + stage * 8; };

  // This block's units [u_begin, u_end) of heads x tiles, head-major.
  const int units = p.heads * sp.tiles;
  const int u_begin = static_cast<int>(int64_t{blockIdx.x} * units / gridDim.x);
  const int u_end = static_cast<int>(int64_t{blockIdx.x + 1} * units / gridDim.x);
  const int steps = (u_end - u_begin) * kSteps;
  const bool issuer = threadIdx.x == 0;

  auto load_w = [&](int head) {  // issuer only
    BarrierExpectBytes(w_barrier, kWBytes);
#pragma unroll 1
    for (int s = 0; s < kSteps; ++s) {
      TmaLoad3d(smem + s * kWSliceBytes, &sp.w_map, s * kStepK, 0, head, w_barrier);
    }
  };
  auto load_latent = [&](int step) {  // issuer only: step of this block's sequence
    const int unit = u_begin + step / kSteps;
    const int stage = step % kRing;
    BarrierExpectBytes(full_barrier(stage), kStageBytes);
    TmaLoad3d(smem + kRingOffset + stage * kStageBytes, &sp.latent_map, (step % kSteps) * kStepK,
              unit / sp.tiles, (unit % sp.tiles) * kRows, full_barrier(stage));
    // The last read of upstream-written latent is in flight: dependents may launch.
    if (step == steps - 1) device::LaunchDependents();
  };

  if (issuer) {
    for (int s = 0; s < kRing; ++s) BarrierInit(full_barrier(s), 1);
    BarrierInit(w_barrier, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  int head = u_begin / sp.tiles;
  // W_UV before the wait: weights are written by no upstream kernel.
  if (issuer) load_w(head);
  device::GridDependencyWait();
  if (issuer) {
    for (int step = 0; step < steps && step < kRing; ++step) load_latent(step);
  }
  uint32_t w_parity = 0;
  BarrierWait(w_barrier, w_parity);

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const uint64_t b_desc0 = SmemDescriptor(smem);
  const uint64_t a_desc0 = SmemDescriptor(smem + kRingOffset);

  int step = 0;
#pragma unroll 1
  for (int unit = u_begin; unit < u_end; ++unit) {
    if (unit / sp.tiles != head) {
      // Every MMA on the old head's W_UV is complete (each step waits for its own).
      head = unit / sp.tiles;
      WarpgroupSync();
      if (issuer) load_w(head);
      w_parity ^= 1;
      BarrierWait(w_barrier, w_parity);
    }
    const int t0 = (unit % sp.tiles) * kRows;

    // This thread's gate words and lengths: rows 16 * warp + group (+8), columns 8j + 2q, +1.
    uint32_t gate_words[2][16];
    bool active[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = t0 + 16 * warp + 8 * half + group;
      active[half] = false;
      if (t < p.rows) {
        active[half] = p.lengths[t / p.q] > 0;
        const bf16* gate_row = p.gate + t * p.gate_row_stride + head * kValueDim + 2 * quarter;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          gate_words[half][j] = *reinterpret_cast<const uint32_t*>(gate_row + 8 * j);
        }
      }
    }

    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
#pragma unroll 1
    for (int k = 0; k < kSteps; ++k, ++step) {
      const int stage = step % kRing;
      BarrierWait(full_barrier(stage), (step / kRing) & 1);
      const uint64_t a_desc = a_desc0 + ((stage * kStageBytes) >> 4);
      const uint64_t b_desc = b_desc0 + ((k * kWSliceBytes) >> 4);
      FenceAccumulators(acc);
      WgmmaFence();
#pragma unroll
      for (int kk = 0; kk < kStepK / 16; ++kk) Wgmma64x128(acc, a_desc + 2 * kk, b_desc + 2 * kk);
      WgmmaCommit();
      WgmmaWaitAll();
      FenceAccumulators(acc);
      // Every thread's MMAs on this stage are done: refill it with the step kRing ahead.
      WarpgroupSync();
      if (issuer && step + kRing < steps) load_latent(step + kRing);
    }

    // Accumulator 4j + e: row 16 * warp + group (+8 for e >= 2), column 8j + 2q + (e & 1).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = t0 + 16 * warp + 8 * half + group;
      if (t >= p.rows) continue;
      bf16* out_row = p.output + t * p.output_row_stride + head * kValueDim + 2 * quarter;
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float v0 = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half]));
        const float v1 = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half + 1]));
        *reinterpret_cast<uint32_t*>(out_row + 8 * j) =
            device::GatePair(v0, v1, gate_words[half][j], active[half]);
      }
    }
  }
}

// cuTensorMapEncodeTiled from the driver, without linking it: the runtime hands out its entry.
PFN_cuTensorMapEncodeTiled_v12000 TensorMapEncoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encode;
}

// A 3-D bf16 tensor map with the 128-byte swizzle; strides in bytes for dimensions 1 and 2.
bool EncodeMap(CUtensorMap* map, const void* base, cuuint64_t d0, cuuint64_t d1, cuuint64_t d2,
               cuuint64_t stride1, cuuint64_t stride2, cuuint32_t box0, cuuint32_t box1,
               cuuint32_t box2) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = TensorMapEncoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {d0, d1, d2};
  const cuuint64_t strides[2] = {stride1, stride2};
  const cuuint32_t box[3] = {box0, box1, box2};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides,
                box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

int MultiprocessorCount() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return 0;
  }
  return count;
}

}  // namespace

cudaError_t MakeMlaValueStreamParams(const MlaValueParams& p, MlaValueStreamParams* out) {
  out->p = p;
  out->tiles = (p.rows + kRows - 1) / kRows;
  const int sms = MultiprocessorCount();
  if (sms == 0) return cudaErrorInvalidDevice;
  out->blocks = std::min(p.heads * out->tiles, sms);
  // One head never steps along the head axis: any stride serves, so give the one a map accepts.
  const int64_t w_head_stride =
      p.heads > 1 ? p.w_head_stride : int64_t{kValueDim} * p.w_row_stride;
  const bool ok =
      EncodeMap(&out->latent_map, p.latent, kLatentDim, p.heads, p.rows, kLatentDim * 2,
                p.latent_row_stride * 2, kStepK, 1, kRows) &&
      EncodeMap(&out->w_map, p.w_uv, kLatentDim, kValueDim, p.heads, p.w_row_stride * 2,
                w_head_stride * 2, kStepK, kValueDim, 1);
  return ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t PrepareMlaValueStream() {
  return cudaFuncSetAttribute(MlaValueStreamKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(kSmemBytes));
}

const void* MlaValueStreamKernelAddress() {
  return reinterpret_cast<const void*>(MlaValueStreamKernel);
}

cudaError_t LaunchMlaValueStream(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
  MlaValueStreamParams sp;
  const cudaError_t made = MakeMlaValueStreamParams(p, &sp);
  if (made != cudaSuccess) return made;
  return LaunchWithPdl(MlaValueStreamKernel, dim3(sp.blocks), dim3(kThreads), kSmemBytes, stream,
                       pdl, sp);
}

}  // namespace mla

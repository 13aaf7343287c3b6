// MlaValueWgmma: the fused W_UV projection and sigmoid gate on Hopper's warpgroup MMA.
//
// One block per (kCols output columns, head, kRows = 64 * kWarpGroups rows); warpgroup g owns
// rows 64g..64g+63 of the block's tile and all kCols columns (one wgmma m64 x kCols x k16 per 16
// latent values). MlaValueTile (mla_value_tile.cu) feeds mma.sync from registers, 64 rows a
// block, and so re-reads W_UV from L2 once per 64 rows and keeps two blocks per multiprocessor
// busy with fragment loads; here both operands are read by the tensor cores straight from shared
// memory, and a 128-row tile reads W_UV once per 128 rows.
//
// K loop: the 512 latent values in 8 steps of 64 (128 bytes a row, one 128-byte swizzle atom).
// Each step's W_UV slice [kCols][64] and latent slice [kRows][64] are copied by every thread
// with cp.async into one of kStages buffers. With kStages = 8 (the small tiles) every copy is
// issued at once: one memory round trip, not one per step. The first steps' W_UV copies are
// issued before the dependency wait: no upstream kernel writes weights.
//
// Shared operand layout: the canonical K-major 128-byte swizzle of wgmma. Row r of a tile is
// 128 bytes at r * 128; its 16-byte word w is stored at word w ^ (r % 8). Tiles start on
// 1024-byte boundaries; 8-row groups are 1024 bytes apart (the descriptor's stride).
//
// Epilogue: the block's gate tile and its rows' lengths arrive in shared memory with the first
// step. Each thread rounds its accumulators to bf16, applies the gate, and writes the result
// over the gate word it read (its own word: no other thread touches it); after a barrier the
// tile leaves in 16-byte stores, whole rows at a time.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"

namespace mla {
namespace {

constexpr int kStepK = 64;                   // latent values per step: one 128-byte row
constexpr int kSteps = kLatentDim / kStepK;  // 8
constexpr int kRowBytes = kStepK * 2;        // 128
constexpr int kWords = kRowBytes / 16;       // 16-byte words per row: 8
constexpr int kAlign = 1024;                 // swizzle atom: 8 rows of 128 bytes

template <int kWarpGroups, int kCols, int kStages>
struct WgTile {
  static constexpr int kRows = 64 * kWarpGroups;
  static constexpr int kThreads = 128 * kWarpGroups;
  static constexpr int kWBytes = kCols * kRowBytes;        // W_UV slice of a step
  static constexpr int kLatentBytes = kRows * kRowBytes;   // latent slice of a step
  static constexpr int kStageBytes = kWBytes + kLatentBytes;
  // The gate tile's rows are padded by 16 bytes so that the epilogue's 4-byte accesses by the 8
  // rows of a warp's quarter land in different banks.
  static constexpr int kGateRowBytes = kCols * 2 + 16;
  static constexpr int kGateOffset = kStages * kStageBytes;
  static constexpr int kLengthsOffset = kGateOffset + kRows * kGateRowBytes;
  static constexpr size_t kSmemBytes = kLengthsOffset + kRows * sizeof(int32_t) + kAlign;
  // Copies per thread and step; thread i moves word i % 8 of rows i / 8 + n * kRowsPerPass,
  // a multiple of 8 rows apart, so that one swizzled offset serves all its copies.
  static constexpr int kRowsPerPass = kThreads / kWords;
  static constexpr int kWCopies = kCols / kRowsPerPass;
  static constexpr int kLatentCopies = kRows / kRowsPerPass;
  static constexpr int kGateWordsPerRow = kCols / 8;
  static constexpr int kGateRowsPerPass = kThreads / kGateWordsPerRow;
  static constexpr int kGateCopies = kRows / kGateRowsPerPass;
  // With a buffer for every step, the prologue issues them all; otherwise kStages - 1 steps
  // fly while one is computed.
  static constexpr bool kAllInFlight = kStages == kSteps;
  static constexpr int kPrologueSteps = kAllInFlight ? kSteps : kStages - 1;

  static_assert(kCols == 64 || kCols == 128, "wgmma n is the block's columns");
  static_assert(kStages >= 2 && kStages <= kSteps, "pipeline depth");
  static_assert(kRowsPerPass % 8 == 0 && kCols % kRowsPerPass == 0 && kRows % kRowsPerPass == 0,
                "every thread copies the same number of words, in one swizzle phase");
  static_assert(kRows % kGateRowsPerPass == 0, "every thread copies the same gate words");
  static_assert(kStageBytes % kAlign == 0 && kWBytes % kAlign == 0, "tiles on atom boundaries");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");
};

// The shared-memory matrix descriptor of wgmma for a K-major operand in the 128-byte swizzle:
// start address, leading offset 16 bytes (unused by this layout), stride 1024 bytes between
// 8-row groups, layout type 1 (128-byte swizzle).
__device__ __forceinline__ uint64_t SmemDescriptor(uint32_t smem_address) {
  return static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{kAlign >> 4} << 32) | (uint64_t{1} << 62);
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
// cp.async writes shared memory through the generic proxy, wgmma reads it through the async
// proxy: each writer fences after its copies land, before the barrier that publishes them.
__device__ __forceinline__ void FenceProxyAsyncShared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Keeps the compiler from moving accumulator reads or writes across the asynchronous MMAs.
template <int kN>
__device__ __forceinline__ void FenceAccumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// cp.async.wait_group with a count known once the step loop is unrolled.
__device__ __forceinline__ void CopyAsyncWaitUntil(int pending) {
  switch (pending) {
    case 0: device::CopyAsyncWait<0>(); break;
    case 1: device::CopyAsyncWait<1>(); break;
    case 2: device::CopyAsyncWait<2>(); break;
    case 3: device::CopyAsyncWait<3>(); break;
    case 4: device::CopyAsyncWait<4>(); break;
    case 5: device::CopyAsyncWait<5>(); break;
    case 6: device::CopyAsyncWait<6>(); break;
    default: device::CopyAsyncWait<7>(); break;
  }
}

#define MLA_WG_D8(i)                                                                       \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),         \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

// D[64 x N] += A[64 x 16] * B[N x 16]^T, both K-major in shared memory; fp32 accumulators.
template <int kN>
__device__ __forceinline__ void Wgmma(float (&d)[kN / 2], uint64_t a, uint64_t b);

template <>
__device__ __forceinline__ void Wgmma<128>(float (&d)[64], uint64_t a, uint64_t b) {
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

template <>
__device__ __forceinline__ void Wgmma<64>(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}"
      : MLA_WG_D8(0), MLA_WG_D8(8), MLA_WG_D8(16), MLA_WG_D8(24)
      : "l"(a), "l"(b), "r"(1));
}

#undef MLA_WG_D8

template <int kWarpGroups, int kCols, int kStages>
__global__ void __launch_bounds__(128 * kWarpGroups)
    MlaValueWgmmaKernel(const MlaValueParams p) {
  using T = WgTile<kWarpGroups, kCols, kStages>;
  extern __shared__ uint4 smem_words[];
  // The swizzle is a function of the address: align the tiles to its 1024-byte atom.
  const uint32_t smem_raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_words));
  const uint32_t smem_base = (smem_raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);

  const int head = blockIdx.y;
  const int column0 = blockIdx.x * kCols;  // the block's first column of the head's 128
  const int t0 = blockIdx.z * T::kRows;

  const int copy_row = threadIdx.x / kWords;
  const int copy_word = threadIdx.x % kWords;
  const int copy_dst = copy_row * kRowBytes + 16 * (copy_word ^ (copy_row % 8));
  const bf16* w_src = p.w_uv + head * p.w_head_stride +
                      (column0 + copy_row) * p.w_row_stride + 8 * copy_word;
  const int64_t w_pass_stride = T::kRowsPerPass * p.w_row_stride;

  auto copy_w = [&](int step) {
    uint8_t* dst = smem + (step % kStages) * T::kStageBytes + copy_dst;
#pragma unroll
    for (int n = 0; n < T::kWCopies; ++n) {
      device::CopyAsync16(dst + n * T::kRowsPerPass * kRowBytes,
                          w_src + n * w_pass_stride + step * kStepK, true);
    }
  };
  auto copy_latent = [&](int step) {
    uint8_t* dst = smem + (step % kStages) * T::kStageBytes + T::kWBytes + copy_dst;
#pragma unroll
    for (int n = 0; n < T::kLatentCopies; ++n) {
      const int t = t0 + copy_row + n * T::kRowsPerPass;
      const bool valid = t < p.rows;  // rows past the end: zeros, multiplied but never stored
      const bf16* src = valid ? p.latent + t * p.latent_row_stride + head * kLatentDim +
                                    step * kStepK + 8 * copy_word
                              : p.latent;
      device::CopyAsync16(dst + n * T::kRowsPerPass * kRowBytes, src, valid);
    }
  };
  auto copy_epilogue_inputs = [&]() {
    const int row = threadIdx.x / T::kGateWordsPerRow;
    const int word = threadIdx.x % T::kGateWordsPerRow;
#pragma unroll
    for (int n = 0; n < T::kGateCopies; ++n) {
      const int r = row + n * T::kGateRowsPerPass;
      const int t = t0 + r;
      const bool valid = t < p.rows;
      const bf16* src =
          valid ? p.gate + t * p.gate_row_stride + head * kValueDim + column0 + 8 * word : p.gate;
      device::CopyAsync16(smem + T::kGateOffset + r * T::kGateRowBytes + 16 * word, src, valid);
    }
    for (int r = threadIdx.x; r < T::kRows; r += T::kThreads) {
      const int t = t0 + r;
      const bool valid = t < p.rows;
      device::CopyAsync4(smem + T::kLengthsOffset + r * sizeof(int32_t),
                         valid ? p.lengths + t / p.q : p.lengths, valid);
    }
  };

  // Prologue: groups 0..kPrologueSteps-1 hold steps 0..kPrologueSteps-1; group 0 also the
  // epilogue's inputs.
#pragma unroll
  for (int step = 0; step < T::kPrologueSteps; ++step) copy_w(step);
  device::GridDependencyWait();
#pragma unroll
  for (int step = 0; step < T::kPrologueSteps; ++step) {
    copy_latent(step);
    if (step == 0) copy_epilogue_inputs();
    device::CopyAsyncCommit();
  }
  // Every read of upstream-written data is in flight once the last step's copies are issued:
  // dependents may launch (their prologues would compete with these copies before that).
  if (T::kAllInFlight) device::LaunchDependents();

  const int warpgroup = threadIdx.x / 128;
  const uint64_t a_desc0 =
      SmemDescriptor(smem_base + T::kWBytes + warpgroup * 64 * kRowBytes);
  const uint64_t b_desc0 = SmemDescriptor(smem_base);

  float acc[kCols / 2];
#pragma unroll
  for (int i = 0; i < kCols / 2; ++i) acc[i] = 0.0f;

#pragma unroll
  for (int step = 0; step < kSteps; ++step) {
    // Groups 0..step are complete; the barrier publishes every thread's copies and tells that
    // all warpgroups finished step - 1's MMAs, whose buffer the copies issued next overwrite.
    if (T::kAllInFlight) {
      CopyAsyncWaitUntil(kSteps - 1 - step);
    } else {
      device::CopyAsyncWait<kStages - 2>();
    }
    FenceProxyAsyncShared();
    __syncthreads();
    if (!T::kAllInFlight) {
      const int next = step + kStages - 1;
      if (next < kSteps) {
        copy_w(next);
        copy_latent(next);
        if (next == kSteps - 1) device::LaunchDependents();
      }
      device::CopyAsyncCommit();  // empty near the end: keeps one group per step
    }

    // Descriptor addresses are in 16-byte units: a stage is kStageBytes / 16 on, and each k16
    // slice of the 128-byte rows 32 bytes (2) on.
    const uint64_t stage = static_cast<uint64_t>((step % kStages) * T::kStageBytes) >> 4;
    FenceAccumulators(acc);
    WgmmaFence();
#pragma unroll
    for (int k = 0; k < kStepK / 16; ++k) {
      Wgmma<kCols>(acc, a_desc0 + stage + 2 * k, b_desc0 + stage + 2 * k);
    }
    WgmmaCommit();
    WgmmaWaitAll();
    FenceAccumulators(acc);
  }

  // Accumulator 4j + e of the warpgroup's m64 x kCols tile: row 16 * warp + group (+8 for
  // e >= 2), column 8j + 2 * quarter + (e & 1).
  const int lane = threadIdx.x % 32;
  const int warp = (threadIdx.x / 32) % 4;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const int32_t* lengths = reinterpret_cast<const int32_t*>(smem + T::kLengthsOffset);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = warpgroup * 64 + 16 * warp + 8 * half + group;
    const bool active = lengths[row] > 0;
    uint8_t* gate_row = smem + T::kGateOffset + row * T::kGateRowBytes + 4 * quarter;
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      uint32_t* word = reinterpret_cast<uint32_t*>(gate_row + 16 * j);
      const float v0 = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half]));
      const float v1 = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half + 1]));
      *word = device::GatePair(v0, v1, *word, active);
    }
  }
  __syncthreads();
  // The output tile, 16 bytes a thread and copy: word w of row r.
#pragma unroll
  for (int n = 0; n < T::kGateCopies; ++n) {
    const int r = threadIdx.x / T::kGateWordsPerRow + n * T::kGateRowsPerPass;
    const int word = threadIdx.x % T::kGateWordsPerRow;
    const int t = t0 + r;
    if (t >= p.rows) continue;
    *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + head * kValueDim + column0 +
                              8 * word) =
        *reinterpret_cast<const uint4*>(smem + T::kGateOffset + r * T::kGateRowBytes + 16 * word);
  }
}

// The configurations MlaValueVariant names: (warpgroups, columns, stages).
template <MlaValueVariant kVariant>
struct WgConfig;
template <>
struct WgConfig<MlaValueVariant::kWgmma128> {
  static constexpr int kWarpGroups = 2, kCols = 128, kStages = 4;
};
template <>
struct WgConfig<MlaValueVariant::kWgmma64> {
  static constexpr int kWarpGroups = 1, kCols = 128, kStages = 8;
};
template <>
struct WgConfig<MlaValueVariant::kWgmma64x64> {
  static constexpr int kWarpGroups = 1, kCols = 64, kStages = 8;
};

template <MlaValueVariant kVariant>
constexpr auto KernelOf() {
  using C = WgConfig<kVariant>;
  return MlaValueWgmmaKernel<C::kWarpGroups, C::kCols, C::kStages>;
}

template <MlaValueVariant kVariant>
cudaError_t Launch(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
  using C = WgConfig<kVariant>;
  using T = WgTile<C::kWarpGroups, C::kCols, C::kStages>;
  const dim3 grid(kValueDim / C::kCols, p.heads, (p.rows + T::kRows - 1) / T::kRows);
  return LaunchWithPdl(KernelOf<kVariant>(), grid, dim3(T::kThreads), T::kSmemBytes, stream, pdl,
                       p);
}

template <MlaValueVariant kVariant>
cudaError_t AllowSmem() {
  using C = WgConfig<kVariant>;
  return cudaFuncSetAttribute(KernelOf<kVariant>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(WgTile<C::kWarpGroups, C::kCols, C::kStages>::kSmemBytes));
}

}  // namespace

cudaError_t PrepareMlaValueWgmma() {
  for (cudaError_t e : {AllowSmem<MlaValueVariant::kWgmma128>(),
                        AllowSmem<MlaValueVariant::kWgmma64>(),
                        AllowSmem<MlaValueVariant::kWgmma64x64>()}) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

const void* MlaValueWgmmaKernelAddress(MlaValueVariant variant) {
  switch (variant) {
    case MlaValueVariant::kWgmma64:
      return reinterpret_cast<const void*>(KernelOf<MlaValueVariant::kWgmma64>());
    case MlaValueVariant::kWgmma64x64:
      return reinterpret_cast<const void*>(KernelOf<MlaValueVariant::kWgmma64x64>());
    default:
      return reinterpret_cast<const void*>(KernelOf<MlaValueVariant::kWgmma128>());
  }
}

cudaError_t LaunchMlaValueWgmma(const MlaValueParams& p, cudaStream_t stream, bool pdl,
                                MlaValueVariant variant) {
  switch (variant) {
    case MlaValueVariant::kWgmma64:
      return Launch<MlaValueVariant::kWgmma64>(p, stream, pdl);
    case MlaValueVariant::kWgmma64x64:
      return Launch<MlaValueVariant::kWgmma64x64>(p, stream, pdl);
    default:
      return Launch<MlaValueVariant::kWgmma128>(p, stream, pdl);
  }
}

}  // namespace mla

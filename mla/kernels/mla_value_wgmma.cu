// MlaValueWgmma: the fused W_UV projection and sigmoid gate on Hopper's warpgroup MMA.
//
// A block (one warpgroup) computes one tile of (kCols output columns, head, 64 rows): one wgmma
// m64nNk16 (N = kCols) per 16 latent values, both operands read by the tensor cores from shared
// memory. It serves the grid between the smallest batches, where MlaValue (mla_value.cu) would
// re-read W_UV for every 16-32 rows, and the largest, where the warp-specialized persistent
// kernel (mla_value_ws.cu) shares each W_UV slice between 128 rows. The configurations
// (kWgConfigs, below):
//   - 64 x 64 tiles: a 4-stage pipeline, or all 8 steps in flight at once;
//   - 64 x 128 tiles: each latent row is read once, not once for each 64-column half.
//
// K: the latent values in steps of 64 (128 bytes a row, one 128-byte swizzle atom). Each step's
// W_UV slice [kCols][64] and latent slice [kRows][64] are copied by every thread with cp.async
// into one of kStages buffers: either a pipeline (kStages - 1 steps in flight while one is
// computed), or all 8 steps at once (one memory round trip; a block a multiprocessor, for grids
// smaller than the GPU), whose MMAs then run on while the next step's copies are waited for:
// no buffer is reused (with a pipeline, that overlap would cost a step in flight, which measured
// slower). The first tile's W_UV copies are issued before the dependency wait: no upstream
// kernel writes weights (its latent, gate and lengths only get an L2 prefetch hint,
// prefetch.cuh). Latent rows past the last row are not copied: their products land in output
// rows that are never stored.
//
// Shared operand layout: the canonical K-major 128-byte swizzle of wgmma. Row r of a tile is
// 128 bytes at r * 128; its 16-byte word w is stored at word w ^ (r % 8). Tiles start on
// 1024-byte boundaries; 8-row groups are 1024 bytes apart (the descriptor's stride).
//
// Epilogue: a tile's gate and its rows' lengths arrive in shared memory with its first copies.
// Each thread rounds its sums to bf16, applies the gate, and writes the result over the gate
// word it read (its own word: no other thread touches it); after a barrier the tile leaves in
// 16-byte stores, whole rows at a time.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <iterator>
#include <utility>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"
#include "mla/kernels/wg_tile.cuh"
#include "mla/kernels/wgmma.cuh"

namespace mla {
namespace {

constexpr int kStepK = device::kWgStepK;
constexpr int kSteps = device::kWgSteps;
constexpr int kRowBytes = device::kWgRowBytes;
constexpr int kAlign = 1024;  // swizzle atom: 8 rows of 128 bytes

template <int kStages, int kCols>
struct WgTile {
  static constexpr int kThreads = 128;  // one warpgroup
  static constexpr int kRows = 64;      // wgmma's m
  static constexpr int kWBytes = kCols * kRowBytes;           // W_UV slice of a step
  static constexpr int kLatentBytes = kRows * kRowBytes;      // latent slice of a step
  static constexpr int kStageBytes = kWBytes + kLatentBytes;
  // With a buffer for every step, the prologue issues them all; otherwise kStages - 1 steps
  // fly while one is computed.
  static constexpr bool kAllInFlight = kStages == kSteps;
  static constexpr int kPrologueSteps = kAllInFlight ? kSteps : kStages - 1;
  using Gate = device::WgGateTile<kRows, kCols>;
  // The epilogue's inputs: the gate tile, then the rows' lengths.
  static constexpr int kGateOffset = kStages * kStageBytes;
  static constexpr int kLengthsOffset = kGateOffset + Gate::kBytes;
  static constexpr size_t kSmemBytes = kLengthsOffset + kRows * sizeof(int32_t) + kAlign;

  static_assert(kCols == 64 || kCols == 128, "wgmma's n: the block's columns");
  static_assert(kStages >= 2 && kStages <= kSteps, "pipeline depth: at most one buffer a step");
  static_assert(kStageBytes % kAlign == 0 && kWBytes % kAlign == 0, "tiles on atom boundaries");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block");
};

// cp.async.wait_group with a count known once the step loop is unrolled (at most 7: WgTile).
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

template <int kStages, int kCols, int kMinBlocks>
__global__ void __launch_bounds__(128, kMinBlocks) MlaValueWgmmaKernel(const MlaValueParams p) {
  using T = WgTile<kStages, kCols>;
  constexpr int kRows = T::kRows;
  extern __shared__ uint4 smem_words[];
  // The swizzle is a function of the address: align the tiles to its 1024-byte atom.
  const uint32_t smem_raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_words));
  const uint32_t smem_base = (smem_raw + kAlign - 1) & ~uint32_t{kAlign - 1};
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words) + (smem_base - smem_raw);

  struct Tile {
    int head, column0, t0;  // column0: the first of its kCols columns of the head's 128
  };
  const Tile tile{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x) * kCols,
                  static_cast<int>(blockIdx.z) * kRows};

  const device::WgStepCopier copier(threadIdx.x);
  // Step `step` into stage buffer `stage`.
  auto copy_w = [&](int step, int stage) {
    copier.W<kCols>(p, tile.head, tile.column0, step, smem + stage * T::kStageBytes);
  };
  auto copy_latent = [&](int step, int stage) {
    copier.Latent<kRows>(p, tile.head, tile.t0, step, smem + stage * T::kStageBytes + T::kWBytes);
  };
  uint8_t* const gate_tile = smem + T::kGateOffset;
  int32_t* const lengths = reinterpret_cast<int32_t*>(smem + T::kLengthsOffset);

  // Prologue: groups 0..kPrologueSteps-1 hold steps 0..kPrologueSteps-1; group 0 also the
  // epilogue's inputs.
#pragma unroll
  for (int step = 0; step < T::kPrologueSteps; ++step) copy_w(step, step);
  device::PrefetchBlockInputsL2(p, tile.head, tile.t0, kRows, 0, kLatentDim, tile.column0, kCols);
  device::GridDependencyWait();
#pragma unroll
  for (int step = 0; step < T::kPrologueSteps; ++step) {
    copy_latent(step, step);
    if (step == 0) {
      T::Gate::Copy(p, tile.head, tile.column0, tile.t0, gate_tile, lengths, threadIdx.x);
    }
    device::CopyAsyncCommit();
  }
  // Every read of upstream-written data is in flight once the last step's copies are issued:
  // dependents may launch (their prologues would compete with these copies before that).
  if (T::kAllInFlight) device::LaunchDependents();

  const uint64_t a_desc0 = device::SmemDescriptor(smem_base + T::kWBytes);
  const uint64_t b_desc0 = device::SmemDescriptor(smem_base);

  float acc[kCols / 2];
#pragma unroll
  for (int j = 0; j < kCols / 2; ++j) acc[j] = 0.0f;

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
    device::FenceProxyAsyncShared();
    __syncthreads();
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
    for (int k = 0; k < kStepK / 16; ++k) {
      device::Wgmma64xN(acc, a_desc0 + stage_offset + 2 * k, b_desc0 + stage_offset + 2 * k);
    }
    device::WgmmaCommit();
    if (T::kAllInFlight && step + 1 < kSteps) {
      device::WgmmaWait<1>();  // step - 1's MMAs are done; this step's run on (no reuse)
    } else {
      device::WgmmaWait<0>();
    }
    device::FenceAccumulators(acc);
  }

  T::Gate::Gate(acc, gate_tile, lengths, 0, threadIdx.x);
  __syncthreads();
  T::Gate::Store64(p, tile.head, tile.column0, tile.t0, 0, gate_tile, threadIdx.x);
}

// The configurations MlaValueVariant names: stages (8: all steps in flight), the tile's
// columns, and the minimum blocks a multiprocessor its launch bounds name (0: none). With 1 the 4-stage pipeline keeps 135
// registers instead of 96 and is 3-6% faster at 64-96 heads x 16-64 rows, at most 1.5% slower
// at 128 x 128-512 (history/lb12_29707b8); the other configurations do not change with it.
struct WgConfig {
  MlaValueVariant variant;
  int stages, cols, min_blocks;
};
constexpr WgConfig kWgConfigs[] = {
    {MlaValueVariant::kWgmmaP4, 4, 64, 1},
    {MlaValueVariant::kWgmmaA8, 8, 64, 0},
    {MlaValueVariant::kWgmmaN128, 3, 128, 0},
};

template <int kIndex>
struct Wg {
  static constexpr WgConfig kC = kWgConfigs[kIndex];
  using T = WgTile<kC.stages, kC.cols>;
  static constexpr auto kKernel = MlaValueWgmmaKernel<kC.stages, kC.cols, kC.min_blocks>;

  static cudaError_t Launch(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
    const int column_blocks = kValueDim / kC.cols;
    const int row_tiles = (p.rows + T::kRows - 1) / T::kRows;
    const dim3 grid(column_blocks, p.heads, row_tiles);
    return LaunchWithPdl(kKernel, grid, dim3(T::kThreads), T::kSmemBytes, stream, pdl, p);
  }
  static cudaError_t AllowSmem() {
    return cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(T::kSmemBytes));
  }
};

// Calls f(Wg<i>) for the configuration of `variant`; false if it has none.
template <typename F, int kIndex = 0>
bool WithConfig(MlaValueVariant variant, F&& f) {
  if constexpr (kIndex == std::size(kWgConfigs)) {
    return false;
  } else {
    if (kWgConfigs[kIndex].variant == variant) {
      f(Wg<kIndex>());
      return true;
    }
    return WithConfig<F, kIndex + 1>(variant, std::forward<F>(f));
  }
}

template <int kIndex = 0>
cudaError_t AllowSmemAll() {
  if constexpr (kIndex == std::size(kWgConfigs)) {
    return cudaSuccess;
  } else {
    const cudaError_t e = Wg<kIndex>::AllowSmem();
    return e != cudaSuccess ? e : AllowSmemAll<kIndex + 1>();
  }
}

}  // namespace

bool IsMlaValueWgmma(MlaValueVariant variant) {
  return WithConfig(variant, [](auto) {});
}

cudaError_t PrepareMlaValueWgmma() { return AllowSmemAll(); }

const void* MlaValueWgmmaKernelAddress(MlaValueVariant variant) {
  const void* address = nullptr;
  WithConfig(variant, [&](auto wg) {
    address = reinterpret_cast<const void*>(decltype(wg)::kKernel);
  });
  return address;
}

cudaError_t LaunchMlaValueWgmma(const MlaValueParams& p, cudaStream_t stream, bool pdl,
                                MlaValueVariant variant) {
  cudaError_t result = cudaErrorInvalidValue;
  WithConfig(variant, [&](auto wg) { result = decltype(wg)::Launch(p, stream, pdl); });
  return result;
}

}  // namespace mla

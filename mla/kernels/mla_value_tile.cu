// MlaValueTile: the fused W_UV projection and sigmoid gate for large row tiles.
//
// One 256-thread block per (kCols output columns, head, 64 rows). MlaValue keeps W_UV in
// registers and so re-reads it for every 16-32 rows; here W_UV and latent pass through shared
// memory in a cp.async pipeline, so a block reads its W_UV slice once per 64 rows, and the values
// stay in registers for the gate (no round trip through memory as on the BMM path).
//
// K loop: the 512 latent values in kSteps = 8 steps of 64. Each step's W_UV slice [kCols][64]
// and latent slice [64 rows][64] are copied into one of kBuffers = 3 shared buffers while the
// tensor cores work on an earlier one. The first steps' W_UV copies are issued before the
// dependency wait: no upstream kernel writes weights. Latent, gate and lengths are read only
// after it (before it they only get an L2 prefetch hint at small W, prefetch.cuh).
//
// Warps: kWarpsM x kWarpsN over the 64 x kCols tile, each 32 columns wide (4 n8 MMA tiles) and
// 64 / kWarpsM rows tall (2 m16 tiles for kCols = 128, 1 for kCols = 64).
//
// Fragments: the k permutation of MlaValue (mla_value.cu): thread (group g, quarter p) reads
// 16 bytes at latent offset 8p of each 32-wide chunk, for its A rows g and g+8 and its B column,
// and MMA s (0, 1) of the chunk takes words 2s, 2s+1. Both operands are permuted alike, so the
// products pair equal latent indices, and no ldmatrix is needed.
//
// Columns: n-tile j's B column g is W_UV column 8(g/2) + 2j + (g&1) of the warp's 32, so that
// accumulators (j, 2p + e) of a thread are columns 8p + 2j + e: 8 adjacent columns per row, and
// the output is written as one 16-byte word per row and thread.
//
// Epilogue inputs: the block's gate tile [64 rows][kCols] and its rows' lengths are copied into
// shared memory with the first latent step, so their latency hides behind the K loop without
// holding registers (the accumulators and fragments need them: 128 a thread at most for two
// blocks per multiprocessor).
//
// Shared memory rows are multiples of 128 bytes without padding; 16-byte word w of row r is
// stored at w ^ 4(r & 1). A fragment load's quarter-warp (the unit of a 16-byte shared access)
// reads 64 bytes of row r and 64 of row r + 1 at the same offset: the XOR puts them in opposite
// halves of the 32 banks. A cp.async quarter-warp writes 128 contiguous bytes of one row.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"
#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"
#include "mla/kernels/prefetch.cuh"

namespace mla {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 64;                      // rows of a block
constexpr int kStepK = 64;                     // latent values per pipeline step
constexpr int kSteps = kLatentDim / kStepK;    // 8
constexpr int kBuffers = 3;                    // pipeline depth
constexpr int kWordsPerRow = kStepK / 8;       // 16-byte words per shared row
constexpr int kWarpCols = 32;
constexpr int kNTiles = kWarpCols / 8;
static_assert(kNTiles == 4, "a row's results leave as one 16-byte store");

template <int kCols>
struct Tile {
  static constexpr int kWarpsN = kCols / kWarpCols;
  static constexpr int kWarpsM = kWarps / kWarpsN;
  static constexpr int kWarpRows = kRows / kWarpsM;
  static constexpr int kMTiles = kWarpRows / 16;
  // Shared memory, in elements: kBuffers pipeline buffers, each the W_UV slice (kCols rows of
  // kStepK) then the latent slice (kRows rows of kStepK); the gate tile (kRows rows of kCols);
  // the rows' lengths (kRows int32).
  static constexpr int kBufferElements = (kCols + kRows) * kStepK;
  static constexpr int kGateOffset = kBuffers * kBufferElements;
  static constexpr int kLengthsOffset = kGateOffset + kRows * kCols;
  static constexpr size_t kSmemBytes =
      size_t{kLengthsOffset} * sizeof(bf16) + kRows * sizeof(int32_t);
  // 16-byte copies per thread: of W_UV and latent per step, of the gate once.
  static constexpr int kWCopies = kCols * kWordsPerRow / kThreads;
  static constexpr int kLatentCopies = kRows * kWordsPerRow / kThreads;
  static constexpr int kGateWordsPerRow = kCols / 8;
  static constexpr int kGateCopies = kRows * kGateWordsPerRow / kThreads;
  // Copy n of thread i moves word i % 8 of row i / 8 + n * kRowsPerPass (gate: word
  // i % kGateWordsPerRow of row i / kGateWordsPerRow + n * kGateRowsPerPass).
  static constexpr int kRowsPerPass = kThreads / kWordsPerRow;
  static constexpr int kGateRowsPerPass = kThreads / kGateWordsPerRow;

  static_assert(kCols % kWarpCols == 0 && kWarps % kWarpsN == 0, "warps must tile the columns");
  static_assert(kWarpRows % 16 == 0, "warps must tile the rows in m16 tiles");
  static_assert(kCols * kWordsPerRow % kThreads == 0 && kRows * kWordsPerRow % kThreads == 0 &&
                    kRows * kGateWordsPerRow % kThreads == 0,
                "every thread copies the same number of words");
  static_assert(kRowsPerPass % 2 == 0 && kGateRowsPerPass % 2 == 0,
                "a thread's copies keep one row parity (the swizzle)");
  static_assert(kGateWordsPerRow % 8 == 0, "gate rows are whole multiples of 128 bytes");
  static_assert(kRows <= kThreads, "one thread copies each row's length");
  static_assert(kLengthsOffset * sizeof(bf16) % 16 == 0, "aligned regions");
};

// Word `word` of shared row `row`, as an element offset from the row's start.
__device__ __forceinline__ int SwizzledWord(int row, int word) {
  return 8 * (word ^ (4 * (row & 1)));
}

template <int kCols>
__global__ void __launch_bounds__(kThreads, 2) MlaValueTileKernel(const MlaValueParams p) {
  using T = Tile<kCols>;
  extern __shared__ uint4 smem_words[];
  bf16* smem = reinterpret_cast<bf16*>(smem_words);  // laid out as Tile<kCols> says

  const int head = blockIdx.y;
  const int column0 = blockIdx.x * kCols;  // the block's first column of the head's 128
  const int t0 = blockIdx.z * kRows;

  // Copy roles: thread i moves word i % 8 of rows i / 8 + n * kRowsPerPass.
  const int copy_row = threadIdx.x / kWordsPerRow;
  const int copy_word = threadIdx.x % kWordsPerRow;
  const int copy_dst = copy_row * kStepK + SwizzledWord(copy_row, copy_word);
  const int64_t w_pass_stride = T::kRowsPerPass * p.w_row_stride;
  const bf16* w_src = p.w_uv + head * p.w_head_stride +
                      (column0 + copy_row) * p.w_row_stride + 8 * copy_word;

  auto copy_w = [&](int step) {
    bf16* dst = smem + (step % kBuffers) * T::kBufferElements + copy_dst;
#pragma unroll
    for (int n = 0; n < T::kWCopies; ++n) {
      device::CopyAsync16(dst + n * T::kRowsPerPass * kStepK,
                          w_src + n * w_pass_stride + step * kStepK, true);
    }
  };
  auto copy_latent = [&](int step) {
    bf16* dst = smem + (step % kBuffers) * T::kBufferElements + kCols * kStepK + copy_dst;
#pragma unroll
    for (int n = 0; n < T::kLatentCopies; ++n) {
      const int t = t0 + copy_row + n * T::kRowsPerPass;
      const bool valid = t < p.rows;  // rows past the end: zeros, multiplied but never stored
      const bf16* src = valid ? p.latent + t * p.latent_row_stride + head * kLatentDim +
                                    step * kStepK + 8 * copy_word
                              : p.latent;
      device::CopyAsync16(dst + n * T::kRowsPerPass * kStepK, src, valid);
    }
  };

  // The epilogue's inputs: the gate tile and each row's length (0 past the last row).
  auto copy_epilogue_inputs = [&]() {
    const int row = threadIdx.x / T::kGateWordsPerRow;
    const int word = threadIdx.x % T::kGateWordsPerRow;
    bf16* dst = smem + T::kGateOffset + row * kCols + SwizzledWord(row, word);
#pragma unroll
    for (int n = 0; n < T::kGateCopies; ++n) {
      const int t = t0 + row + n * T::kGateRowsPerPass;
      const bool valid = t < p.rows;
      const bf16* src =
          valid ? p.gate + t * p.gate_row_stride + head * kValueDim + column0 + 8 * word : p.gate;
      device::CopyAsync16(dst + n * T::kGateRowsPerPass * kCols, src, valid);
    }
    if (threadIdx.x < kRows) {
      const int t = t0 + threadIdx.x;
      const bool valid = t < p.rows;
      int32_t* lengths = reinterpret_cast<int32_t*>(smem + T::kLengthsOffset);
      device::CopyAsync4(lengths + threadIdx.x, valid ? p.lengths + t / p.q : p.lengths, valid);
    }
  };

  // Prologue. Group 0 = W_UV steps 0 and 1, latent step 0 and the epilogue's inputs; group 1 =
  // latent step 1. Step s then always lives in groups <= s.
#pragma unroll
  for (int step = 0; step < kBuffers - 1; ++step) copy_w(step);
  device::PrefetchBlockInputsL2(p, head, t0, kRows, 0, kLatentDim, column0, kCols,
                                device::kMaxPrefetchWork / 2);
  device::GridDependencyWait();
  copy_latent(0);
  copy_epilogue_inputs();
  device::CopyAsyncCommit();
#pragma unroll
  for (int step = 1; step < kBuffers - 1; ++step) {
    copy_latent(step);
    device::CopyAsyncCommit();
  }

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int group = lane / 4;
  const int quarter = lane % 4;
  const int warp_row0 = (warp / T::kWarpsN) * T::kWarpRows;  // of the block's 64
  const int warp_col0 = (warp % T::kWarpsN) * kWarpCols;     // of the block's kCols

  // Fragment rows in a buffer: A rows warp_row0 + 16m + 8half + group of the latent slice; the
  // B row (W_UV column) of n-tile j is warp_col0 + 8(group/2) + 2j + (group&1). All have the
  // parity of group, so one swizzled offset per chunk serves both operands.
  const int a_row = kCols + warp_row0 + group;
  const int b_row = warp_col0 + 8 * (group / 2) + (group & 1);
  int chunk_offset[2];
#pragma unroll
  for (int c = 0; c < 2; ++c) chunk_offset[c] = SwizzledWord(group, 4 * c + quarter);

  float acc[T::kMTiles][kNTiles][4] = {};
#pragma unroll 1
  for (int step = 0; step < kSteps; ++step) {
    // Groups 0..step are complete (one, the newest, may still fly); the barrier makes every
    // thread's copies visible and tells that all threads are done with step - 1's buffer,
    // which the copies issued next overwrite.
    device::CopyAsyncWait<kBuffers - 2>();
    __syncthreads();
    const int next = step + kBuffers - 1;
    if (next < kSteps) {
      copy_w(next);
      copy_latent(next);
    }
    // The block's last reads of upstream-written data are in flight: dependents may launch (as
    // in MlaValue; earlier, their prologues would compete with these copies for bandwidth).
    if (next == kSteps - 1) device::LaunchDependents();
    device::CopyAsyncCommit();  // empty near the end: keeps one group per step

    const bf16* buffer = smem + (step % kBuffers) * T::kBufferElements;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      uint4 a[T::kMTiles][2];
#pragma unroll
      for (int m = 0; m < T::kMTiles; ++m) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          a[m][half] = *reinterpret_cast<const uint4*>(
              buffer + (a_row + 16 * m + 8 * half) * kStepK + chunk_offset[c]);
        }
      }
      uint4 b[kNTiles];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        b[j] = *reinterpret_cast<const uint4*>(buffer + (b_row + 2 * j) * kStepK +
                                               chunk_offset[c]);
      }
#pragma unroll
      for (int m = 0; m < T::kMTiles; ++m) {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          device::MmaBf16(acc[m][j], a[m][0].x, a[m][1].x, a[m][0].y, a[m][1].y, b[j].x, b[j].y);
          device::MmaBf16(acc[m][j], a[m][0].z, a[m][1].z, a[m][0].w, a[m][1].w, b[j].z, b[j].w);
        }
      }
    }
  }

  // The gate tile and lengths arrived in group 0, made visible by the first step's barrier.
  // Accumulator e of n-tile j: row group (+8 for e >= 2), column 8p + 2j + (e & 1).
  const int32_t* lengths = reinterpret_cast<const int32_t*>(smem + T::kLengthsOffset);
  const int gate_word = (warp_col0 + 8 * quarter) / 8;
  const int out_column = head * kValueDim + column0 + warp_col0 + 8 * quarter;
  // Pair (m, half, j) of this thread's rows (rows past the end too: their gate words are
  // zero-filled, their results not stored), all gated at once.
  constexpr int kPairs = T::kMTiles * 2 * kNTiles;
  float v[2 * kPairs];
  uint32_t gates[kPairs];
  bool active[kPairs];
  uint32_t out[kPairs];
#pragma unroll
  for (int m = 0; m < T::kMTiles; ++m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_row0 + 16 * m + 8 * half + group;
      const uint4 gate = *reinterpret_cast<const uint4*>(smem + T::kGateOffset + row * kCols +
                                                         SwizzledWord(row, gate_word));
      const uint32_t* gate_words = &gate.x;
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const int i = (2 * m + half) * kNTiles + j;
        v[2 * i] = __bfloat162float(__float2bfloat16_rn(acc[m][j][2 * half]));
        v[2 * i + 1] = __bfloat162float(__float2bfloat16_rn(acc[m][j][2 * half + 1]));
        gates[i] = gate_words[j];
        active[i] = lengths[row] > 0;
      }
    }
  }
  device::GatePairs(v, gates, active, out);
#pragma unroll
  for (int m = 0; m < T::kMTiles; ++m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = t0 + warp_row0 + 16 * m + 8 * half + group;
      if (t >= p.rows) continue;
      const uint32_t* o = out + (2 * m + half) * kNTiles;
      *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + out_column) =
          make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
}

template <int kCols>
cudaError_t Launch(const MlaValueParams& p, cudaStream_t stream, bool pdl) {
  const dim3 grid(kValueDim / kCols, p.heads, (p.rows + kRows - 1) / kRows);
  return LaunchWithPdl(MlaValueTileKernel<kCols>, grid, dim3(kThreads), Tile<kCols>::kSmemBytes,
                       stream, pdl, p);
}

template <int kCols>
cudaError_t AllowSmem() {
  return cudaFuncSetAttribute(MlaValueTileKernel<kCols>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(Tile<kCols>::kSmemBytes));
}

}  // namespace

cudaError_t PrepareMlaValueTile() {
  const cudaError_t wide = AllowSmem<128>();
  return wide != cudaSuccess ? wide : AllowSmem<64>();
}

const void* MlaValueTileKernelAddress(int columns) {
  return columns == 128 ? reinterpret_cast<const void*>(MlaValueTileKernel<128>)
                        : reinterpret_cast<const void*>(MlaValueTileKernel<64>);
}

cudaError_t LaunchMlaValueTile(const MlaValueParams& p, cudaStream_t stream, bool pdl,
                               int columns) {
  return columns == 128 ? Launch<128>(p, stream, pdl) : Launch<64>(p, stream, pdl);
}

}  // namespace mla

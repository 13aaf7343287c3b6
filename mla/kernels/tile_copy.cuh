#ifndef MLA_TAIL_MLA_KERNELS_TILE_COPY_CUH_
#define MLA_TAIL_MLA_KERNELS_TILE_COPY_CUH_

// The shared-memory tiles of the wgmma kernels (tile.cu, persistent_128x128.cu) and the
// cp.async copies that fill them.
//
// K runs in steps of 64 latent values (128 bytes a row, one 128-byte swizzle atom). A stage
// buffer holds one step: the W_UV slice [kCols][64], then the latent slice [kRows][64], both in
// the canonical K-major 128-byte swizzle of wgmma (wgmma.cuh). The gate tile [kRows][kCols] has
// row r's 16-byte word w at word w ^ (r % 8) (rows of 32 columns, two to 128 bytes:
// w ^ (r / 2 % 4)), so that the epilogue's 4-byte accesses to one word of 8 rows (a warp) land in
// different banks. kCopyThreads threads copy: thread i moves word i % 8 of rows
// i / 8 + n * kRowsPerPass, a multiple of 8 rows apart, so that one swizzled offset serves all its
// copies.
//
// e4m3 W_UV (fp8.cuh): a step's W_UV slice arrives as [kCols][64] e4m3, 4 16-byte words a row
// (or 8 8-byte words, where 16-byte ones would leave copying threads without a word). Word j of
// row r (16-byte: the step's latent values 16j..16j+15) becomes bf16 words 2j and 2j + 1, stored
// at (2j) ^ (r % 8) and (2j + 1) ^ (r % 8): together the 32-byte segment j ^ ((r % 8) >> 1) of the
// row (8-byte: bf16 word j, at j ^ (r % 8)). The word is copied into the first half of that
// segment, so dequantizing it in place writes only bytes no other word occupies: each word is
// converted by one thread, with no barrier between the conversions' reads and writes
// (E4m3Slice). Thread i copies word i % words-a-row of rows i / words-a-row + n * (kCopyThreads /
// words-a-row).

#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/fp8.cuh"
#include "mla/kernels/params.h"

namespace mla_tail::internal::device {

template <int CopyThreads, int Rows, int Cols>
struct TileLayout {
  static constexpr int kCopyThreads = CopyThreads;
  static constexpr int kRows = Rows;
  static constexpr int kCols = Cols;
  static constexpr int kStepK = 64;                       // latent values a step: one 128-byte row
  static constexpr int kSteps = kLatentDim / kStepK;      // 8
  static constexpr int kRowBytes = kStepK * 2;            // 128
  static constexpr int kWords = kRowBytes / 16;           // 16-byte words a row: 8
  static constexpr int kAlign = 1024;                     // the swizzle's atom: 8 rows of 128 bytes
  static constexpr int kWBytes = kCols * kRowBytes;       // W_UV slice of a step
  static constexpr int kLatentBytes = kRows * kRowBytes;  // latent slice of a step
  static constexpr int kStageBytes = kWBytes + kLatentBytes;
  static constexpr int kRowsPerPass = kCopyThreads / kWords;
  static constexpr int kWCopies = kCols / kRowsPerPass;
  static constexpr int kLatentCopies = kRows / kRowsPerPass;

  static constexpr int kGateRowBytes = kCols * 2;
  static constexpr int kGateSwizzle = kCols >= 64 ? 8 : kCols / 8;
  static constexpr int kGateRowsPerLine = 8 / kGateSwizzle;
  static constexpr int kGateWordsPerRow = kCols / 8;
  static constexpr int kGateRowsPerPass = kCopyThreads / kGateWordsPerRow;
  static constexpr int kGateCopies = kRows / kGateRowsPerPass;
  // The byte offset of 16-byte word w of the gate tile's row r.
  static __device__ __forceinline__ int GateWord(int r, int w) {
    return r * kGateRowBytes + 16 * (w ^ (r / kGateRowsPerLine % kGateSwizzle));
  }

  static_assert(kRowsPerPass % 8 == 0 && kCols % kRowsPerPass == 0 && kRows % kRowsPerPass == 0,
                "every thread copies the same number of words, in one swizzle phase");
  static_assert(kCopyThreads % kGateWordsPerRow == 0 && kRows % kGateRowsPerPass == 0,
                "every thread copies the same gate words");
  static_assert(kStageBytes % kAlign == 0 && kWBytes % kAlign == 0, "tiles on atom boundaries");
};

// A tile of the output: head `head`, columns [column0, column0 + kCols), rows [t0, t0 + kRows).
struct TileAt {
  int head, column0, t0;
};

// A step's e4m3 W_UV slice of kCols rows, staged in a stage buffer's W_UV area (above), in words
// of kWordBytes (16 or 8) e4m3 values.
template <int kCols, int kWordBytes = 16>
struct E4m3Slice {
  static_assert(kWordBytes == 16 || kWordBytes == 8, "16- or 8-byte words");
  static constexpr int kRowBytes = 128;  // of the bf16 slice: one swizzle atom row
  static constexpr int kBytesPerWord = kWordBytes;
  static constexpr int kWordsPerRow = 64 / kWordBytes;
  static constexpr int kBf16WordsPerWord = kWordBytes / 8;  // 16-byte bf16 words a word becomes
  static constexpr int kSegmentShift = kBf16WordsPerWord == 2 ? 1 : 0;  // log2 of it
  // The byte offset of e4m3 word j of row r (staged), and of bf16 word w of row r.
  static __device__ __forceinline__ int Staged(int r, int j) {
    return r * kRowBytes + 16 * kBf16WordsPerWord * (j ^ ((r % 8) >> kSegmentShift));
  }
  static __device__ __forceinline__ int Bf16Word(int r, int w) {
    return r * kRowBytes + 16 * (w ^ (r % 8));
  }

  // Dequantizes the words of `thread` (of kThreads converting threads: word thread %
  // kWordsPerRow of rows thread / kWordsPerRow + n * kThreads / kWordsPerRow) in place, with
  // `scale` (the step's latent block's). The thread must see those words' copies (it issued them
  // and waited, or acquired the barrier their copies arrived on); the MMAs may read the result
  // once the converting threads have fenced (FenceProxyAsyncShared) and met at a barrier.
  template <int kThreads>
  static __device__ __forceinline__ void Dequantize(uint8_t* w_area, int thread, float scale) {
    constexpr int kRowsPerPass = kThreads / kWordsPerRow;
    static_assert(kRowsPerPass % 8 == 0 && kCols % kRowsPerPass == 0, "one swizzle phase");
    const int row = thread / kWordsPerRow;
    const int j = thread % kWordsPerRow;
#pragma unroll
    for (int n = 0; n < kCols / kRowsPerPass; ++n) {
      const int r = row + n * kRowsPerPass;
      if constexpr (kWordBytes == 16) {
        const uint4 raw = *reinterpret_cast<const uint4*>(w_area + Staged(r, j));
        const uint4 lo = DequantizeE4m3x8(E4m3Half(raw, 0), scale);
        const uint4 hi = DequantizeE4m3x8(E4m3Half(raw, 1), scale);
        *reinterpret_cast<uint4*>(w_area + Bf16Word(r, 2 * j)) = lo;
        *reinterpret_cast<uint4*>(w_area + Bf16Word(r, 2 * j + 1)) = hi;
      } else {
        const uint2 raw = *reinterpret_cast<const uint2*>(w_area + Staged(r, j));
        *reinterpret_cast<uint4*>(w_area + Bf16Word(r, j)) = DequantizeE4m3x8(raw, scale);
      }
    }
  }
};

// The slice's form for kThreads copying threads: 8-byte words where 16-byte ones would leave
// threads without a word (the 64 x 32 tiles with two warpgroups).
template <int kCols, int kThreads>
using E4m3SliceFor = E4m3Slice<kCols, kThreads / 4 <= kCols ? 16 : 8>;

// One copying thread's share of a tile's copies (threads 0..kCopyThreads-1 of the block). Each
// call only issues cp.async copies: committing, waiting and publishing are the kernel's.
// kHoistedWStride: a thread's W_UV rows are addressed with a stride computed once (Tile)
// or with n * kRowsPerPass * w_row_stride at each copy (the -ws kernel). The same addresses, but
// compiled differently: each kernel keeps the code that was measured. Likewise the two forms of
// the lengths' copy below.
template <typename L, bool kHoistedWStride, WeightType kW = WeightType::kBf16>
struct TileCopier {
  int row;                // of the first of this thread's rows in a slice
  int word;               // its 16-byte word of each
  int dst;                // the swizzled byte offset of that word in a slice
  int64_t w_pass_stride;  // elements between a thread's W_UV rows (with kHoistedWStride)

  __device__ __forceinline__ explicit TileCopier(const FusedTailParams& p)
      : row(threadIdx.x / L::kWords),
        word(threadIdx.x % L::kWords),
        dst(row * L::kRowBytes + 16 * (word ^ (row % 8))),
        w_pass_stride(L::kRowsPerPass * p.w_row_stride) {}

  // Step `step` of tile `c`'s W_UV rows (its output columns) into stage buffer `stage` of the
  // stages at `smem`: bf16 in the swizzled layout, or e4m3 staged for E4m3Slice.
  __device__ __forceinline__ void W(const FusedTailParams& p, uint8_t* smem, const TileAt& c,
                                    int step, int stage) const {
    if constexpr (kW == WeightType::kE4m3) {
      using S = E4m3SliceFor<L::kCols, L::kCopyThreads>;
      static_assert(S::kBytesPerWord == 16, "the copier's copies: 16-byte words");
      constexpr int kRowsPerPass = L::kCopyThreads / S::kWordsPerRow;
      static_assert(kRowsPerPass % 8 == 0 && L::kCols % kRowsPerPass == 0, "one swizzle phase");
      const int r = threadIdx.x / S::kWordsPerRow;
      const int j = threadIdx.x % S::kWordsPerRow;
      uint8_t* to = smem + stage * L::kStageBytes + S::Staged(r, j);
      const fp8_e4m3* src = p.w_uv_fp8 + c.head * p.w_head_stride +
                            (c.column0 + r) * p.w_row_stride + step * L::kStepK + 16 * j;
#pragma unroll
      for (int n = 0; n < L::kCols / kRowsPerPass; ++n) {
        CopyAsync16(to + n * kRowsPerPass * L::kRowBytes, src + n * kRowsPerPass * p.w_row_stride,
                    true);
      }
      return;
    }
    uint8_t* to = smem + stage * L::kStageBytes + dst;
    const bf16* src = p.w_uv + c.head * p.w_head_stride + (c.column0 + row) * p.w_row_stride +
                      step * L::kStepK + 8 * word;
#pragma unroll
    for (int n = 0; n < L::kWCopies; ++n) {
      if constexpr (kHoistedWStride) {
        CopyAsync16(to + n * L::kRowsPerPass * L::kRowBytes, src + n * w_pass_stride, true);
      } else {
        CopyAsync16(to + n * L::kRowsPerPass * L::kRowBytes,
                    src + n * L::kRowsPerPass * p.w_row_stride, true);
      }
    }
  }

  // With e4m3 W_UV, step `step`'s slice in stage buffer `stage`, copied by this thread (after
  // its cp.async.wait_group for them), dequantized in place with `scales`' block of the step.
  static __device__ __forceinline__ void DequantizeW(uint8_t* smem, int step, int stage,
                                                     const float4& scales) {
    if constexpr (kW == WeightType::kE4m3) {
      E4m3SliceFor<L::kCols, L::kCopyThreads>::template Dequantize<L::kCopyThreads>(
          smem + stage * L::kStageBytes, threadIdx.x, BlockScale(scales, step / 2));
    }
  }

  // Step `step` of tile `c`'s latent rows into stage buffer `stage` of the stages at `smem`. Rows
  // at and past `rows` (the live rows) are not copied: their products land in output rows never
  // stored.
  __device__ __forceinline__ void Latent(const FusedTailParams& p, int rows, uint8_t* smem,
                                         const TileAt& c, int step, int stage) const {
    uint8_t* to = smem + stage * L::kStageBytes + L::kWBytes + dst;
#pragma unroll
    for (int n = 0; n < L::kLatentCopies; ++n) {
      const int t = c.t0 + row + n * L::kRowsPerPass;
      if (t < rows) {
        CopyAsync16(
            to + n * L::kRowsPerPass * L::kRowBytes,
            p.latent + t * p.latent_row_stride + c.head * kLatentDim + step * L::kStepK + 8 * word,
            true);
      }
    }
  }

  // The epilogue's inputs of tile `c`: its gate into the gate tile (kGated; without a gate
  // nothing is copied there), its rows' lengths (int32) into `lengths`; rows at and past `rows`
  // (the live rows) are zero-filled.
  template <bool kGated = true>
  static __device__ __forceinline__ void EpilogueInputs(const FusedTailParams& p, int rows,
                                                        const TileAt& c, uint8_t* gate_tile,
                                                        uint8_t* lengths) {
    const int gate_row = threadIdx.x / L::kGateWordsPerRow;
    const int gate_word = threadIdx.x % L::kGateWordsPerRow;
#pragma unroll
    for (int n = 0; kGated && n < L::kGateCopies; ++n) {
      const int r = gate_row + n * L::kGateRowsPerPass;
      const int t = c.t0 + r;
      const bool valid = t < rows;
      const bf16* src =
          valid ? p.gate + t * p.gate_row_stride + c.head * kValueDim + c.column0 + 8 * gate_word
                : p.gate;
      CopyAsync16(gate_tile + L::GateWord(r, gate_word), src, valid);
    }
    if constexpr (L::kRows == L::kCopyThreads) {  // one row a thread
      const int t = c.t0 + threadIdx.x;
      const bool valid = t < rows;
      CopyAsync4(reinterpret_cast<int32_t*>(lengths) + threadIdx.x,
                 valid ? p.lengths + t / p.q : p.lengths, valid);
    } else {
      for (int r = threadIdx.x; r < L::kRows; r += L::kCopyThreads) {
        const int t = c.t0 + r;
        const bool valid = t < rows;
        CopyAsync4(lengths + r * sizeof(int32_t), valid ? p.lengths + t / p.q : p.lengths, valid);
      }
    }
  }
};

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_TILE_COPY_CUH_

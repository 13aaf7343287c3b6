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

#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
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

// One copying thread's share of a tile's copies (threads 0..kCopyThreads-1 of the block). Each
// call only issues cp.async copies: committing, waiting and publishing are the kernel's.
// kHoistedWStride: a thread's W_UV rows are addressed with a stride computed once (Tile)
// or with n * kRowsPerPass * w_row_stride at each copy (the -ws kernel). The same addresses, but
// compiled differently: each kernel keeps the code that was measured. Likewise the two forms of
// the lengths' copy below.
template <typename L, bool kHoistedWStride>
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
  // stages at `smem`.
  __device__ __forceinline__ void W(const FusedTailParams& p, uint8_t* smem, const TileAt& c,
                                    int step, int stage) const {
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

  // Step `step` of tile `c`'s latent rows into stage buffer `stage` of the stages at `smem`. Rows
  // past the end are not copied: their products land in output rows never stored.
  __device__ __forceinline__ void Latent(const FusedTailParams& p, uint8_t* smem, const TileAt& c,
                                         int step, int stage) const {
    uint8_t* to = smem + stage * L::kStageBytes + L::kWBytes + dst;
#pragma unroll
    for (int n = 0; n < L::kLatentCopies; ++n) {
      const int t = c.t0 + row + n * L::kRowsPerPass;
      if (t < p.rows) {
        CopyAsync16(
            to + n * L::kRowsPerPass * L::kRowBytes,
            p.latent + t * p.latent_row_stride + c.head * kLatentDim + step * L::kStepK + 8 * word,
            true);
      }
    }
  }

  // The epilogue's inputs of tile `c`: its gate into the gate tile, its rows' lengths (int32)
  // into `lengths`; rows past the end are zero-filled.
  static __device__ __forceinline__ void EpilogueInputs(const FusedTailParams& p, const TileAt& c,
                                                        uint8_t* gate_tile, uint8_t* lengths) {
    const int gate_row = threadIdx.x / L::kGateWordsPerRow;
    const int gate_word = threadIdx.x % L::kGateWordsPerRow;
#pragma unroll
    for (int n = 0; n < L::kGateCopies; ++n) {
      const int r = gate_row + n * L::kGateRowsPerPass;
      const int t = c.t0 + r;
      const bool valid = t < p.rows;
      const bf16* src =
          valid ? p.gate + t * p.gate_row_stride + c.head * kValueDim + c.column0 + 8 * gate_word
                : p.gate;
      CopyAsync16(gate_tile + L::GateWord(r, gate_word), src, valid);
    }
    if constexpr (L::kRows == L::kCopyThreads) {  // one row a thread
      const int t = c.t0 + threadIdx.x;
      const bool valid = t < p.rows;
      CopyAsync4(reinterpret_cast<int32_t*>(lengths) + threadIdx.x,
                 valid ? p.lengths + t / p.q : p.lengths, valid);
    } else {
      for (int r = threadIdx.x; r < L::kRows; r += L::kCopyThreads) {
        const int t = c.t0 + r;
        const bool valid = t < p.rows;
        CopyAsync4(lengths + r * sizeof(int32_t), valid ? p.lengths + t / p.q : p.lengths, valid);
      }
    }
  }
};

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_TILE_COPY_CUH_

#ifndef MLA_KERNELS_WG_TILE_CUH_
#define MLA_KERNELS_WG_TILE_CUH_

// The shared-memory tiles of the wgmma kernels (mla_value_wgmma.cu, mla_value_ws.cu), and the
// 128 threads (a warpgroup) that fill and drain them:
//   - a K step's W_UV slice [kCols][64] and latent slice [kRows][64] in the 128-byte swizzle of
//     wgmma (wgmma.cuh);
//   - a tile's gate, row r's 16-byte word w at word w ^ (r % 8), so that the epilogue's 4-byte
//     accesses to one word of 8 rows (a warp) land in different banks; the epilogue writes its
//     results over the gate words it read (its own: no other thread touches them), and the tile
//     then leaves in 16-byte stores, whole rows at a time;
//   - the tile rows' lengths.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/params.h"

namespace mla {
namespace device {

inline constexpr int kWgStepK = 64;                  // latent values a step: one 128-byte row
inline constexpr int kWgSteps = kLatentDim / kWgStepK;  // 8
inline constexpr int kWgRowBytes = kWgStepK * 2;     // 128

// A K step's copies by 128 threads: thread i moves word i % 8 of rows i / 8 + 16 n, a multiple
// of 8 rows apart, so that one swizzled offset serves all its copies.
class WgStepCopier {
 public:
  static constexpr int kWords = kWgRowBytes / 16;  // 8
  static constexpr int kRowsPerPass = 128 / kWords;  // 16

  __device__ explicit WgStepCopier(int thread)
      : row_(thread / kWords),
        word_(thread % kWords),
        offset_(row_ * kWgRowBytes + 16 * (word_ ^ (row_ % 8))) {}

  // W_UV rows column0 .. column0 + kCols - 1 of `head`, step `step`'s 64 latent values.
  template <int kCols>
  __device__ __forceinline__ void W(const MlaValueParams& p, int head, int column0, int step,
                                    uint8_t* tile) const {
    static_assert(kCols % kRowsPerPass == 0, "every thread copies the same words");
    uint8_t* dst = tile + offset_;
    const bf16* src = p.w_uv + head * p.w_head_stride + (column0 + row_) * p.w_row_stride +
                      step * kWgStepK + 8 * word_;
    const int64_t pass_stride = kRowsPerPass * p.w_row_stride;
#pragma unroll
    for (int n = 0; n < kCols / kRowsPerPass; ++n) {
      CopyAsync16(dst + n * kRowsPerPass * kWgRowBytes, src + n * pass_stride, true);
    }
  }

  // Latent rows t0 .. t0 + kRows - 1 of `head`, step `step`. Rows past the end are not copied:
  // their products land in output rows that are never stored.
  template <int kRows>
  __device__ __forceinline__ void Latent(const MlaValueParams& p, int head, int t0, int step,
                                         uint8_t* tile) const {
    static_assert(kRows % kRowsPerPass == 0, "every thread copies the same words");
    uint8_t* dst = tile + offset_;
#pragma unroll
    for (int n = 0; n < kRows / kRowsPerPass; ++n) {
      const int t = t0 + row_ + n * kRowsPerPass;
      if (t < p.rows) {
        CopyAsync16(dst + n * kRowsPerPass * kWgRowBytes,
                    p.latent + t * p.latent_row_stride + head * kLatentDim + step * kWgStepK +
                        8 * word_,
                    true);
      }
    }
  }

 private:
  int row_, word_, offset_;
};

// A tile's gate (kRows x kCols columns from column0 of its head) and lengths.
template <int kRows, int kCols>
struct WgGateTile {
  static constexpr int kRowBytes = kCols * 2;
  static constexpr int kBytes = kRows * kRowBytes;
  static constexpr int kWordsPerRow = kCols / 8;
  static constexpr int kRowsPerPass = 128 / kWordsPerRow;  // by 128 threads
  static_assert(kCols == 64 || kCols == 128, "wgmma's n");
  static_assert(kRows % kRowsPerPass == 0 && 64 % kRowsPerPass == 0 && kRows <= 128,
                "every thread copies and stores the same words, and at most one length");

  // The byte offset of 16-byte word w of row r.
  static __device__ __forceinline__ int Word(int r, int w) {
    return r * kRowBytes + 16 * (w ^ (r % 8));
  }

  // The gate words and lengths of rows t0 .. t0 + kRows - 1, by 128 threads (rows past the
  // end: zeros).
  static __device__ __forceinline__ void Copy(const MlaValueParams& p, int head, int column0,
                                              int t0, uint8_t* gate_tile, int32_t* lengths,
                                              int thread) {
    const int row = thread / kWordsPerRow;
    const int word = thread % kWordsPerRow;
#pragma unroll
    for (int n = 0; n < kRows / kRowsPerPass; ++n) {
      const int r = row + n * kRowsPerPass;
      const int t = t0 + r;
      const bool valid = t < p.rows;
      const bf16* src = valid ? p.gate + t * p.gate_row_stride + head * kValueDim + column0 +
                                    8 * word
                              : p.gate;
      CopyAsync16(gate_tile + Word(r, word), src, valid);
    }
    if (thread < kRows) {
      const int t = t0 + thread;
      const bool valid = t < p.rows;
      CopyAsync4(lengths + thread, valid ? p.lengths + t / p.q : p.lengths, valid);
    }
  }

  // The epilogue of one warpgroup's m64 x kCols accumulators, tile rows row0 .. row0 + 63:
  // v = bf16(sum) gated (SPEC.md), written over the gate words read. Accumulator 4j + e: row
  // 16 * warp + group (+8 for e >= 2), column 8j + 2 * quarter + (e & 1). Pairs are gated a
  // batch of halves (8 rows) at once: both for 64 columns, one at a time for 128, which keeps
  // 32 pairs in registers beside the accumulators, not 64.
  static __device__ __forceinline__ void Gate(const float (&acc)[kCols / 2], uint8_t* gate_tile,
                                              const int32_t* lengths, int row0, int thread) {
    constexpr int kOutTiles = kCols / 8;
    constexpr int kHalvesPerBatch = kOutTiles <= 8 ? 2 : 1;
    constexpr int kPairs = kHalvesPerBatch * kOutTiles;
    const int lane = thread % 32;
    const int warp = thread / 32;
    const int group = lane / 4;
    const int quarter = lane % 4;
#pragma unroll
    for (int half0 = 0; half0 < 2; half0 += kHalvesPerBatch) {
      float v[2 * kPairs];
      uint32_t gates[kPairs];
      bool active[kPairs];
      uint32_t gated[kPairs];
#pragma unroll
      for (int b = 0; b < kHalvesPerBatch; ++b) {
        const int half = half0 + b;
        const int row = row0 + 16 * warp + 8 * half + group;
        const bool row_active = lengths[row] > 0;
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          const int n = kOutTiles * b + j;
          v[2 * n] = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half]));
          v[2 * n + 1] = __bfloat162float(__float2bfloat16_rn(acc[4 * j + 2 * half + 1]));
          gates[n] = *reinterpret_cast<const uint32_t*>(gate_tile + Word(row, j) + 4 * quarter);
          active[n] = row_active;
        }
      }
      GatePairs(v, gates, active, gated);
#pragma unroll
      for (int b = 0; b < kHalvesPerBatch; ++b) {
        const int row = row0 + 16 * warp + 8 * (half0 + b) + group;
#pragma unroll
        for (int j = 0; j < kOutTiles; ++j) {
          *reinterpret_cast<uint32_t*>(gate_tile + Word(row, j) + 4 * quarter) =
              gated[kOutTiles * b + j];
        }
      }
    }
  }

  // Stores tile rows row0 .. row0 + 63 (those below p.rows), 16 bytes a thread and copy, by
  // the 128 threads of the warpgroup that gated them, after a barrier among them.
  static __device__ __forceinline__ void Store64(const MlaValueParams& p, int head, int column0,
                                                 int t0, int row0, const uint8_t* gate_tile,
                                                 int thread) {
    const int word = thread % kWordsPerRow;
#pragma unroll
    for (int n = 0; n < 64 / kRowsPerPass; ++n) {
      const int r = row0 + thread / kWordsPerRow + n * kRowsPerPass;
      const int t = t0 + r;
      if (t >= p.rows) continue;
      *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + head * kValueDim +
                                column0 + 8 * word) =
          *reinterpret_cast<const uint4*>(gate_tile + Word(r, word));
    }
  }
};

}  // namespace device
}  // namespace mla

#endif  // MLA_KERNELS_WG_TILE_CUH_

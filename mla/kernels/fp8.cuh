#ifndef MLA_TAIL_MLA_KERNELS_FP8_CUH_
#define MLA_TAIL_MLA_KERNELS_FP8_CUH_

// e4m3 W_UV and the e4m3 output in the fused kernels (docs/spec.md, "e4m3 W_UV", "The e4m3
// output"): the weight type as a template parameter, the loads of e4m3 fragments and block
// scales, their dequantization to the bf16 operands the MMAs take, and the output's quantization
// with the amax of a (row, head) gathered across lanes, warps and a cluster's blocks.
//
// Dequantization: w_bf16 = bf16(float(w) * s), the product in FP32 rounded to nearest even, then
// rounded to bf16 (nearest even): e4m3 -> f16 two at a time (cvt.rn.f16x2.e4m3x2, exact: every
// e4m3 value, NaN included, is an f16), f16 -> f32 (exact), one FP32 multiply, and the pair packed
// to bf16x2 (cvt.rn.bf16x2.f32). No flush to zero anywhere (the build does not use fast math).

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/mbarrier.cuh"
#include "mla/kernels/params.h"

namespace mla_tail::internal::device {

// What a kernel instantiated for weight type kW reads as W_UV: its element type and the base of
// the caller's tensor.
template <WeightType kW>
struct WeightTraits;
template <>
struct WeightTraits<WeightType::kBf16> {
  using T = bf16;
  static __device__ __forceinline__ const bf16* Base(const FusedTailParams& p) { return p.w_uv; }
};
template <>
struct WeightTraits<WeightType::kE4m3> {
  using T = fp8_e4m3;
  static __device__ __forceinline__ const fp8_e4m3* Base(const FusedTailParams& p) {
    return p.w_uv_fp8;
  }
};

// The register kernels' k permutation (ColumnSplit, LatentSplit): the latent index at which
// quarter `quarter`'s 8 values of 32-value chunk c start, for its W_UV word and its A fragment
// alike. bf16 W_UV: 32c + 8q, one 16-byte word a chunk. e4m3 W_UV: chunks 2i and 2i + 1 are the
// halves of one 16-byte e4m3 word, latent values 64i + 16q .. 64i + 16q + 15. For both,
// ChunkStart(c, q) = ChunkStart(c, 0) + ChunkStart(0, q).
template <WeightType kW>
__host__ __device__ constexpr int ChunkStart(int c, int quarter) {
  return kW == WeightType::kBf16 ? 32 * c + 8 * quarter : 64 * (c / 2) + 16 * quarter + 8 * (c % 2);
}

// The permutation pairs each latent index once (a chunk's 4 quarters take 8 values each), within
// the 128-value block of its chunk's scale (c / 4), and as one sum of the chunk's and the
// quarter's starts; e4m3 words start on 16-byte boundaries.
template <WeightType kW>
constexpr bool ChunkStartIsAPermutation() {
  bool seen[kLatentDim] = {};
  for (int c = 0; c < kLatentDim / 32; ++c) {
    for (int q = 0; q < 4; ++q) {
      const int start = ChunkStart<kW>(c, q);
      if (start / 128 != c / 4 || start != ChunkStart<kW>(c, 0) + ChunkStart<kW>(0, q))
        return false;
      if (kW == WeightType::kE4m3 && c % 2 == 0 && start % 16 != 0) return false;
      for (int e = 0; e < 8; ++e) {
        if (seen[start + e]) return false;
        seen[start + e] = true;
      }
    }
  }
  return true;  // 16 x 4 x 8 distinct indices of 512: every one
}
static_assert(ChunkStartIsAPermutation<WeightType::kBf16>() &&
                  ChunkStartIsAPermutation<WeightType::kE4m3>(),
              "the register kernels' k permutation");

// Head `head`'s 4 block scales (latent blocks 0..3), one 16-byte read-only load; zeros for bf16
// weights (not read).
template <WeightType kW>
__device__ __forceinline__ float4 LoadBlockScales(const FusedTailParams& p, int head) {
  if constexpr (kW == WeightType::kBf16) {
    return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  } else {
    float4 s;
    asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(s.x), "=f"(s.y), "=f"(s.z), "=f"(s.w)
                 : "l"(p.w_uv_scale + head * p.w_uv_scale_head_stride));
    return s;
  }
}

// Head `head`'s scale of latent block `block` (0..3), one 4-byte read-only load: for a thread whose
// block is a runtime value, so that nothing selects among loaded scales before the dependency
// wait (a select there holds the warp until the load has landed).
__device__ __forceinline__ float LoadBlockScale(const FusedTailParams& p, int head, int block) {
  float s;
  asm volatile("ld.global.nc.f32 %0, [%1];"
               : "=f"(s)
               : "l"(p.w_uv_scale + head * p.w_uv_scale_head_stride + block));
  return s;
}

// Scale j (0..3) of a head's four, j known once loops are unrolled.
__device__ __forceinline__ float BlockScale(const float4& s, int j) {
  return j == 0 ? s.x : j == 1 ? s.y : j == 2 ? s.z : s.w;
}

// Two e4m3 (the low byte is the first) as bf16x2 (the first in the low half): bf16(float(w) * s).
__device__ __forceinline__ uint32_t DequantizeE4m3x2(uint16_t pair, float s) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * s, f.y * s);
  uint32_t word;
  memcpy(&word, &b, sizeof(word));
  return word;
}

// 8 e4m3 (bytes in order) as 8 bf16: one 16-byte bf16 fragment word from 8 bytes.
__device__ __forceinline__ uint4 DequantizeE4m3x8(uint2 w, float s) {
  return make_uint4(DequantizeE4m3x2(static_cast<uint16_t>(w.x), s),
                    DequantizeE4m3x2(static_cast<uint16_t>(w.x >> 16), s),
                    DequantizeE4m3x2(static_cast<uint16_t>(w.y), s),
                    DequantizeE4m3x2(static_cast<uint16_t>(w.y >> 16), s));
}

// Half `half` (0, 1) of a 16-byte e4m3 word: 8 values, one bf16 fragment word once dequantized.
__device__ __forceinline__ uint2 E4m3Half(const uint4& word, int half) {
  return half == 0 ? make_uint2(word.x, word.y) : make_uint2(word.z, word.w);
}

// The e4m3 output of docs/spec.md for two values x of a (row, head) whose amax is known:
// e4m3(x * inverse) rounded to nearest even with saturation to +-448, where inverse = 448 / amax;
// zeros where the inverse is infinite (`zero`). The first value in the low byte.
__device__ __forceinline__ uint16_t QuantizeE4m3x2(float x0, float x1, float inverse, bool zero) {
  const __nv_fp8x2_storage_t q =
      __nv_cvt_float2_to_fp8x2(make_float2(x0 * inverse, x1 * inverse), __NV_SATFINITE, __NV_E4M3);
  return zero ? uint16_t{0} : static_cast<uint16_t>(q);
}

// amax's magnitude bits from bf16 values: |x|'s bits order like |x| itself, and NaN's above
// every other, so an integer max over (bits & 0x7fff) is max |x| with NaN propagating.
__device__ __forceinline__ uint32_t Bf16x2MagnitudeMax(uint32_t word) {
  return max(word & 0x7fffu, (word >> 16) & 0x7fffu);
}

// The (row, head) scale and the multiplier of its values, from amax's bf16 magnitude bits:
// scale = amax / 448, inverse = 448 / amax (each one IEEE FP32 division, rounded to nearest even);
// the values are zeros where the inverse is infinite (amax = 0, or below 448 / FLT_MAX).
// amax = 0 (inactive rows, rows past the count in a tile) divides 1 instead and selects the
// results: a zero divisor or dividend takes the division's slow path, a subroutine call per
// thread (without it the tiles took 0.80-0.91x the time at 1-16 rows; docs/design.md).
struct OutputScale {
  float scale, inverse;
  bool zero;
};
__device__ __forceinline__ OutputScale OutputScaleOf(uint32_t amax_bits) {
  const bool amax_zero = amax_bits == 0;
  const float amax = amax_zero ? 1.0f : __uint_as_float(amax_bits << 16);
  const float inverse = __fdiv_rn(448.0f, amax);
  const float scale = __fdiv_rn(amax, 448.0f);
  return {amax_zero ? 0.0f : scale, inverse, amax_zero || inverse == __int_as_float(0x7f800000)};
}

// amax over the lanes of an aligned group of kLanes (a power of two up to 32) of a warp; every
// lane of the warp calls.
template <int kLanes>
__device__ __forceinline__ uint32_t GroupMax(uint32_t m) {
#pragma unroll
  for (int offset = 1; offset < kLanes; offset *= 2) {
    m = max(m, __shfl_xor_sync(0xffffffffu, m, offset));
  }
  return m;
}

// This block's rank in its cluster.
__device__ __forceinline__ unsigned ClusterRank() {
  return cooperative_groups::this_cluster().block_rank();
}

// The partial amax of each row of a cluster's kBlocks blocks, kParts parts a block (its warps or
// tiles), in every block's shared memory. Each block stores each of its parts into every block's
// copy with st.async, which counts the bytes on the receiving block's transaction barrier
// (`landed`); a block waits for its own copy only (Await), then reads its rows' amax locally. No
// cluster barrier stands between the parts and their use, and none keeps a block from leaving: a
// block's copy is complete only once every store into it has landed. Every part of every row is
// published exactly once (the barrier expects all of their bytes), into shared memory that
// nothing else uses: stores land while the receiving block may still be computing.
//
// Distributed shared memory may be written only once its block has started and initialized its
// barrier: every thread calls Start() first thing and AwaitStarts() before its first Publish (the
// cluster barrier's one phase, which by then has long completed). The arrival is relaxed (with a
// release the e4m3-output kernels took up to 0.2 us longer at few rows; docs/design.md), and the
// expectation of the bytes follows the wait (set before the arrival, compute-sanitizer's racecheck
// reports it as racing with the initialization).
template <int kBlocks, int kParts, int kRows>
struct ClusterRowAmax {
  alignas(16) uint32_t parts[kRows][kBlocks * kParts];
  uint64_t landed;  // transaction barrier: every block's parts in `parts`
  static constexpr uint32_t kBytes = sizeof(parts);

  __device__ __forceinline__ void Start() {
    if (threadIdx.x == 0) {
      MbarrierInit(&landed, 1);
      FenceMbarrierInitForCluster();
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  // Stores from other blocks may land before the expectation: the transaction count may run below
  // zero, and the phase cannot complete before its one arrival, which comes with the expectation.
  __device__ __forceinline__ void AwaitStarts() {
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    if (threadIdx.x == 0) MbarrierArriveExpectBytes(&landed, kBytes);
  }

  // This block's part `part` of row `row`, into every block's copy.
  __device__ __forceinline__ void Publish(int row, int part, uint32_t m) {
    const uint32_t* slot = &parts[row][ClusterRank() * kParts + part];
#pragma unroll
    for (int rank = 0; rank < kBlocks; ++rank) StoreAsyncToRank(slot, m, &landed, rank);
  }

  // Returns once every block's parts have landed in this block's copy.
  __device__ __forceinline__ void Await() { MbarrierWait<MbarrierScope::kCluster>(&landed, 0); }

  // Row `row`'s amax bits, after Await().
  __device__ __forceinline__ uint32_t Max(int row) const {
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < kBlocks * kParts; ++i) m = max(m, parts[row][i]);
    return m;
  }
};

// The one object of type T in a block's static shared memory (allocated only where called).
template <typename T>
__device__ __forceinline__ T& SharedObject() {
  __shared__ T object;
  return object;
}

// 8 bf16 values (one 16-byte word) of a (row, head) as 8 e4m3 bytes.
__device__ __forceinline__ uint2 QuantizeBf16x8(const uint4& x, const OutputScale& s) {
  const uint32_t* words = &x.x;
  uint16_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat162 pair;
    memcpy(&pair, &words[i], sizeof(pair));
    const float2 f = __bfloat1622float2(pair);
    q[i] = QuantizeE4m3x2(f.x, f.y, s.inverse, s.zero);
  }
  return make_uint2(q[0] | (uint32_t{q[1]} << 16), q[2] | (uint32_t{q[3]} << 16));
}

// amax bits of 8 bf16 values.
__device__ __forceinline__ uint32_t Bf16x8MagnitudeMax(const uint4& x) {
  return max(max(Bf16x2MagnitudeMax(x.x), Bf16x2MagnitudeMax(x.y)),
             max(Bf16x2MagnitudeMax(x.z), Bf16x2MagnitudeMax(x.w)));
}

// The e4m3 output's quantization from a tile's gated bf16 values in shared memory (the gate
// tile's layout L: row r's 16-byte word w at word w ^ swizzle(r)): a row's words split over
// kLanes consecutive lanes, kWords each, so that a warp gathers a row's amax in log2(kLanes)
// shuffles and works out its scale once for kWords * 8 values (with 16 lanes of one word each,
// the shuffles and the two divisions took most of the quantization's instructions).
//   - Lane `part` of a row holds words part + kLanes * i: at each load and store the row's lanes
//     take kLanes consecutive words, so a store writes whole 32-byte sectors (kLanes = 4) where
//     a lane's own consecutive words would leave partial ones.
//   - A warp's kRowsPerWarp rows are ordered by a permutation of the row index's bits
//     (RowInWarp), found at compile time, such that the 8 lanes of each quarter warp read 8
//     distinct 16-byte bank groups at every load: consecutive rows would read the same ones.
template <typename L, int kWords>
struct GatedRowWords {
  static_assert(kWords > 0 && L::kGateWordsPerRow % kWords == 0, "a row splits evenly");
  static constexpr int kLanes = L::kGateWordsPerRow / kWords;
  static_assert(kLanes > 0 && 32 % kLanes == 0 && (kLanes & (kLanes - 1)) == 0,
                "a row's lanes are an aligned power-of-two group of a warp");
  static constexpr int kRowsPerWarp = 32 / kLanes;
  static constexpr int kRowBits = kRowsPerWarp == 8 ? 3 : kRowsPerWarp == 16 ? 4 : 5;
  static_assert(1 << kRowBits == kRowsPerWarp, "rows a warp: 8, 16 or 32");

  // The 16-byte bank group of word w of the gate tile's row r.
  static constexpr int BankGroup(int r, int w) {
    return (r * (L::kGateRowBytes / 16) + (w ^ (r / L::kGateRowsPerLine % L::kGateSwizzle))) % 8;
  }
  // Row (of a warp's kRowsPerWarp) of slot s under the bit permutation `code` (bit b of s goes to
  // bit (code >> 3b) & 7 of the row).
  static constexpr int Permuted(int s, int code) {
    int r = 0;
    for (int b = 0; b < kRowBits; ++b) r |= ((s >> b) & 1) << ((code >> (3 * b)) & 7);
    return r;
  }
  static constexpr bool ConflictFree(int code) {
    int used = 0;  // the code is a permutation
    for (int b = 0; b < kRowBits; ++b) used |= 1 << ((code >> (3 * b)) & 7);
    if (used != (1 << kRowBits) - 1) return false;
    for (int base = 0; base < L::kRows; base += kRowsPerWarp) {
      for (int i = 0; i < kWords; ++i) {
        for (int quarter = 0; quarter < 4; ++quarter) {
          int groups = 0;
          for (int lane = 8 * quarter; lane < 8 * quarter + 8; ++lane) {
            groups |=
                1 << BankGroup(base + Permuted(lane / kLanes, code), lane % kLanes + kLanes * i);
          }
          if (groups != 0xff) return false;
        }
      }
    }
    return true;
  }
  static constexpr int FindPermutation() {
    for (int code = 0; code < 1 << (3 * kRowBits); ++code) {
      if (ConflictFree(code)) return code;
    }
    return -1;
  }
  static constexpr int kPermutation = FindPermutation();
  static_assert(kPermutation >= 0, "some order of a warp's rows reads without bank conflicts");

  // The row, of its warp's kRowsPerWarp consecutive rows, that lane `lane` serves.
  static __device__ __forceinline__ int RowInWarp(int lane) {
    return Permuted(lane / kLanes, kPermutation);
  }

  uint4 x[kWords];  // words part + kLanes * i of the row

  __device__ __forceinline__ void Load(const uint8_t* gate_tile, int r, int part) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      x[i] = *reinterpret_cast<const uint4*>(gate_tile + L::GateWord(r, part + kLanes * i));
    }
  }

  // amax bits of this lane's values.
  __device__ __forceinline__ uint32_t MagnitudeMax() const {
    uint32_t m = Bf16x8MagnitudeMax(x[0]);
#pragma unroll
    for (int i = 1; i < kWords; ++i) m = max(m, Bf16x8MagnitudeMax(x[i]));
    return m;
  }

  // This lane's values quantized with `scale`, into the row's e4m3 output (its column 0).
  __device__ __forceinline__ void Store(fp8_e4m3* row_out, int part,
                                        const OutputScale& scale) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      *reinterpret_cast<uint2*>(row_out + 8 * (part + kLanes * i)) = QuantizeBf16x8(x[i], scale);
    }
  }
};

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_FP8_CUH_

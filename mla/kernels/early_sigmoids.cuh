#ifndef MLA_TAIL_MLA_KERNELS_EARLY_SIGMOIDS_CUH_
#define MLA_TAIL_MLA_KERNELS_EARLY_SIGMOIDS_CUH_

// The gate's sigmoids (docs/spec.md's s) computed before the epilogue, while a tile's MMAs run, so
// that the epilogue only multiplies and rounds; kept as FP32 in registers. For a thread's kPairs
// pairs of accumulators in wgmma's m64nN layout: pair n = 2j + half is accumulators 4j + 2 * half
// and 4j + 2 * half + 1, one 4-byte gate word. `Layout` locates them in the tile: Layout::Row(n),
// the pair's row of the tile, and Layout::GateOffset(n), its gate word's byte offset in the gate
// tile.
// Used by the Tile and Persistent128x128 configurations where it measured faster.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"

namespace mla_tail::internal::device {

template <typename Layout, int kPairs>
struct EarlySigmoidPairs {
  float2 sigmoid[kPairs];
  bool in_range = true;

  // Pairs [begin, end) (compile-time once unrolled), from the gate tile and the rows' lengths in
  // shared memory.
  __device__ __forceinline__ void Compute(int begin, int end, const uint8_t* gate_tile,
                                          const int32_t* lengths) {
#pragma unroll
    for (int n = begin; n < end; ++n) {
      const uint32_t gate = *reinterpret_cast<const uint32_t*>(gate_tile + Layout::GateOffset(n));
      sigmoid[n] = SigmoidPairInRange(gate, lengths[Layout::Row(n)] > 0, in_range);
    }
  }

  // Each pair rounded to bf16, gated and written over the gate word it was computed from (this
  // thread's own). A gate below -87.3 or NaN on an active row: the sigmoids the general way.
  __device__ __forceinline__ void Gate(const float* acc, uint8_t* gate_tile,
                                       const int32_t* lengths) {
    if (!in_range) {
#pragma unroll
      for (int n = 0; n < kPairs; ++n) {
        sigmoid[n] =
            SigmoidPair(*reinterpret_cast<const uint32_t*>(gate_tile + Layout::GateOffset(n)));
      }
    }
#pragma unroll
    for (int n = 0; n < kPairs; ++n) {
      const int e = 4 * (n / 2) + 2 * (n % 2);
      *reinterpret_cast<uint32_t*>(gate_tile + Layout::GateOffset(n)) =
          GateWithSigmoid(__bfloat162float(__float2bfloat16_rn(acc[e])),
                          __bfloat162float(__float2bfloat16_rn(acc[e + 1])), sigmoid[n],
                          lengths[Layout::Row(n)] > 0);
    }
  }
};

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_EARLY_SIGMOIDS_CUH_

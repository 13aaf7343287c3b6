#ifndef MLA_TAIL_EXAMPLES_RUNTIME_FORMULAS_H_
#define MLA_TAIL_EXAMPLES_RUNTIME_FORMULAS_H_

// The stand-in model's values, computed the same way on the GPU (stand_ins.cu) and on the CPU
// (reference.cc). Every value is a small multiple of a power of two, exact in bf16, so that the
// FP32 dot products of the tail are exact in any order: the reference differs from the kernels
// only through the rounding of the gate's sigmoid product.
//
// Head and column indices are the model's: a device that serves a slice of the heads (tensor
// parallelism, runtime --devices) computes and checks the values of its own global heads and
// columns, so that the slices of several devices are together one model's layer.

#include <cstdint>

#ifdef __CUDACC__
#define EXAMPLE_HD __host__ __device__ __forceinline__
#else
#define EXAMPLE_HD inline
#endif

namespace example {

EXAMPLE_HD uint32_t Mix(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t e) {
  uint32_t x =
      a * 0x9e3779b1u ^ b * 0x85ebca77u ^ c * 0xc2b2ae3du ^ d * 0x27d4eb2fu ^ e * 0x165667b1u;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  x *= 0x297a2d39u;
  x ^= x >> 15;
  return x;
}

// The attention output of step `step`, layer `layer`: latent[t, h, k] = LatentCode / 16, in
// [-7/16, 7/16]; h is the model's head.
EXAMPLE_HD int LatentCode(int step, int layer, int t, int h, int k) {
  return static_cast<int>(Mix(step, layer, t, h, k) % 15u) - 7;
}
inline constexpr float kLatentScale = 1.0f / 16;

// W_UV of buffer set `set`, layer `layer`: (h, k, d) = WeightCode / 64, in [-4/64, 4/64], h the
// model's head. A dot product of 512 is then a multiple of 2^-10 below 2^4: exact in FP32
// whatever the order.
EXAMPLE_HD int WeightCode(int set, int layer, int h, int k, int d) {
  return static_cast<int>(Mix(0x10000 + set, layer, h, k, d) % 9u) - 4;
}
inline constexpr float kWeightScale = 1.0f / 64;

// The gate of buffer set `set`, layer `layer`: gate[t, column], in [-4, 4]; column = h * 128 + d
// with h the model's head.
EXAMPLE_HD float GateValue(int set, int layer, int t, int column) {
  return static_cast<float>(static_cast<int>(Mix(0x20000 + set, layer, t, column, 7) % 33u) - 16) /
         4.0f;
}

// The columns of each row the stand-in output projection adds into its per-layer checksum.
EXAMPLE_HD int ChecksumColumn(int i, int columns) {
  return i == 0 ? 0 : i == 1 ? 1 : i == 2 ? columns / 2 + 3 : columns - 1;
}
inline constexpr int kChecksumColumns = 4;

}  // namespace example

#endif  // MLA_TAIL_EXAMPLES_RUNTIME_FORMULAS_H_

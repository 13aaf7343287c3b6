#ifndef MLA_TAIL_TESTING_SUPPORT_TEST_VALUES_H_
#define MLA_TAIL_TESTING_SUPPORT_TEST_VALUES_H_

// Deterministic test data as a pure function of (seed, logical index), the same on host and
// device: a GPU kernel fills whole tensors fast, and the CPU reference reads exactly the elements
// it needs. Every value is exact in bf16, so the fill itself rounds nothing; the arithmetic here
// is on integers only, so that host and device agree bit for bit.

#include <cstdint>

#ifdef __CUDACC__
#define MLA_HOST_DEVICE __host__ __device__
#else
#define MLA_HOST_DEVICE
#endif

namespace mla_tail_testing {

enum class Values : int {
  // Integers that make every dot product of the tail exact in FP32, in any order, yet mostly
  // ±[257, ~4800], where bf16(v) must round (odd sums below 512 are ties): a kernel that skips
  // the bf16(v) step, truncates v or rounds the output toward zero differs from the reference on
  // a large share of elements. For latent and W_UV, whose innermost axis is the latent axis of
  // 512: each 512-element vector (index / 512) draws a sign and a mean in {1, 2, 3}, each element
  // that mean plus -2..2 (so |element| <= 5 and |partial sum| < 2^24).
  kRoundingIntegers,
  kUniform,  // k / 128 for k in [-128, 128)
  // Gates where the kernels' branch-free sigmoid runs (g > -87.3): uniform over [-87, 16] on a
  // grid of 1/256, rounded to bf16; 1 in 64 an in-range edge gate (0, -0, -87: the lowest bf16
  // in range, 16, 100, the largest bf16, the smallest subnormal), and 1 in 512 a gate below the
  // range, which the general path computes: -87.5, -88.5 (a subnormal sigmoid), -89 and -100
  // (expf overflows: sigmoid 0), the lowest bf16. Rare, because one such gate sends the whole
  // thread that holds it to the general path.
  kGates,
  kGatesWithInfinities,  // kGates with +inf and -inf among the in-range edge gates
  kUniformGates,         // k / 16 for k in [-128, 128]
};

MLA_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

MLA_HOST_DEVICE inline uint32_t FloatBitsOf(float f) {
  union {
    float f;
    uint32_t u;
  } pun = {f};
  return pun.u;
}

// bf16 bits of a value exact in bf16 (the low 16 bits of its float are zero).
MLA_HOST_DEVICE inline uint16_t ExactBf16Bits(float f) {
  return static_cast<uint16_t>(FloatBitsOf(f) >> 16);
}

// bf16 bits of a finite float, rounded to nearest even.
MLA_HOST_DEVICE inline uint16_t RoundedBf16Bits(float f) {
  uint32_t u = FloatBitsOf(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// The latent axis: the innermost dimension of latent and W_UV as the fills index them.
inline constexpr int kTestVectorLength = 512;

MLA_HOST_DEVICE inline uint16_t TestGate(uint64_t r, bool infinities) {
  // Bits, not arithmetic: 0, -0, -87, 16, 100, the largest bf16, the smallest subnormal, +inf,
  // -inf; then -87.5, -88.5, -89, -100, the lowest bf16.
  constexpr uint16_t kInRange[9] = {0x0000, 0x8000, 0xC2AE, 0x4180, 0x42C8,
                                    0x7F7F, 0x0001, 0x7F80, 0xFF80};
  constexpr uint16_t kBelow[5] = {0xC2AF, 0xC2B1, 0xC2B2, 0xC2C8, 0xFF7F};
  const uint64_t pick = r >> 32;
  if (r % 512 == 0) return kBelow[pick % 5];
  if (r % 64 == 1) return kInRange[pick % (infinities ? 9 : 7)];
  const int64_t grid = -87 * 256 + static_cast<int64_t>(pick % ((87 + 16) * 256 + 1));
  return RoundedBf16Bits(static_cast<float>(grid) / 256.0f);
}

MLA_HOST_DEVICE inline uint16_t TestValue(uint64_t seed, uint64_t index, Values kind) {
  const uint64_t r = SplitMix64(SplitMix64(seed) ^ index);
  switch (kind) {
    case Values::kRoundingIntegers: {
      const uint64_t vector =
          SplitMix64(SplitMix64(seed ^ 0x5eedull) ^ (index / kTestVectorLength));
      const int mean = 1 + static_cast<int>(vector % 3);
      const int sign = (vector >> 32) & 1 ? -1 : 1;
      return ExactBf16Bits(static_cast<float>(sign * (mean + static_cast<int>(r % 5) - 2)));
    }
    case Values::kUniform:
      return ExactBf16Bits(static_cast<float>(static_cast<int>(r % 256) - 128) / 128.0f);
    case Values::kGates:
      return TestGate(r, /*infinities=*/false);
    case Values::kGatesWithInfinities:
      return TestGate(r, /*infinities=*/true);
    case Values::kUniformGates:
      return ExactBf16Bits(static_cast<float>(static_cast<int>(r % 257) - 128) / 16.0f);
  }
  return 0;
}

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_TEST_VALUES_H_

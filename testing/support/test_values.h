#ifndef MLA_TAIL_TESTING_SUPPORT_TEST_VALUES_H_
#define MLA_TAIL_TESTING_SUPPORT_TEST_VALUES_H_

// Deterministic test data as a pure function of (seed, logical index), the same on host and
// device: a GPU kernel fills whole tensors fast, and the CPU reference reads exactly the elements
// it needs. Every value is exact in bf16, so the fill itself rounds nothing.

#include <cstdint>

#ifdef __CUDACC__
#define MLA_HOST_DEVICE __host__ __device__
#else
#define MLA_HOST_DEVICE
#endif

namespace mla_tail_testing {

enum class Values : int {
  kSmallIntegers,  // -2..2: dot products are exact in FP32, so results compare bit for bit
  kUniform,        // k / 128 for k in [-128, 128)
  kExactGates,     // 0, 30, -100: sigmoid exactly 0.5, 1 and 0 in FP32
  kUniformGates,   // k / 16 for k in [-128, 128]
};

MLA_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// bf16 bits of a value exact in bf16 (the low 16 bits of its float are zero).
MLA_HOST_DEVICE inline uint16_t ExactBf16Bits(float f) {
  union {
    float f;
    uint32_t u;
  } pun = {f};
  return static_cast<uint16_t>(pun.u >> 16);
}

MLA_HOST_DEVICE inline uint16_t TestValue(uint64_t seed, uint64_t index, Values kind) {
  const uint64_t r = SplitMix64(SplitMix64(seed) ^ index);
  switch (kind) {
    case Values::kSmallIntegers:
      return ExactBf16Bits(static_cast<float>(static_cast<int>(r % 5) - 2));
    case Values::kUniform:
      return ExactBf16Bits(static_cast<float>(static_cast<int>(r % 256) - 128) / 128.0f);
    case Values::kExactGates: {
      const float gates[3] = {0.0f, 30.0f, -100.0f};
      return ExactBf16Bits(gates[r % 3]);
    }
    case Values::kUniformGates:
      return ExactBf16Bits(static_cast<float>(static_cast<int>(r % 257) - 128) / 16.0f);
  }
  return 0;
}

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_TEST_VALUES_H_

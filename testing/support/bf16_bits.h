#ifndef MLA_TAIL_TESTING_SUPPORT_BF16_BITS_H_
#define MLA_TAIL_TESTING_SUPPORT_BF16_BITS_H_

// bf16 as raw bits, written from the IEEE definitions (not CUDA's conversions), so that the
// reference shares no rounding code with the kernels under test.

#include <cstdint>
#include <cstring>

namespace mla_tail_testing {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float Bf16ToFloat(uint16_t bits) { return BitsFloat(uint32_t{bits} << 16); }

// Round to nearest, ties to even; NaN stays NaN (quieted); overflow rounds to infinity.
inline uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline bool Bf16IsNan(uint16_t bits) { return (bits & 0x7fffu) > 0x7f80u; }

// The next bf16 value towards +inf / -inf (finite inputs).
inline uint16_t Bf16Next(uint16_t bits, bool up) {
  if ((bits & 0x7fffu) == 0) return up ? 0x0001u : 0x8001u;  // smallest subnormals
  const bool negative = bits & 0x8000u;
  return static_cast<uint16_t>(negative == up ? bits - 1 : bits + 1);
}

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_BF16_BITS_H_

#ifndef MLA_TAIL_TESTING_SUPPORT_BF16_BITS_H_
#define MLA_TAIL_TESTING_SUPPORT_BF16_BITS_H_

// bf16 as raw bits, written from the IEEE definitions (not CUDA's conversions), so that the
// reference shares no rounding code with the kernels under test.

#include <cmath>
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

// Round to nearest, ties to even, from the exact double: no intermediate float, whose own
// rounding would round twice (1 + 2^-8 + 2^-30 is 0x3f81, through a float 0x3f80). NaN stays
// NaN; overflow rounds to infinity; subnormal bf16 results are kept.
inline uint16_t DoubleToBf16(double x) {
  if (std::isnan(x)) return 0x7fc0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  if (std::isinf(magnitude)) return sign | 0x7f80;
  if (magnitude == 0) return sign;
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  // The spacing of bf16 values at this magnitude: 8 significant bits, subnormals below 2^-126.
  const int quantum = exponent - 1 < -126 ? -133 : exponent - 1 - 7;
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(magnitude, -quantum)), quantum);
  if (rounded >= 0x1p128) return sign | 0x7f80;
  return sign | static_cast<uint16_t>(FloatBits(static_cast<float>(rounded)) >> 16);
}

inline bool Bf16IsNan(uint16_t bits) { return (bits & 0x7fffu) > 0x7f80u; }
inline bool Bf16IsInf(uint16_t bits) { return (bits & 0x7fffu) == 0x7f80u; }

// The next bf16 value towards +inf / -inf (finite inputs).
inline uint16_t Bf16Next(uint16_t bits, bool up) {
  if ((bits & 0x7fffu) == 0) return up ? 0x0001u : 0x8001u;  // smallest subnormals
  const bool negative = bits & 0x8000u;
  return static_cast<uint16_t>(negative == up ? bits - 1 : bits + 1);
}

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_BF16_BITS_H_

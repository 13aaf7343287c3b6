#ifndef MLA_TAIL_TESTING_SUPPORT_E4M3_BITS_H_
#define MLA_TAIL_TESTING_SUPPORT_E4M3_BITS_H_

// float8_e4m3fn as raw bits, written from its definition (1 sign bit, 4 exponent bits of bias 7,
// 3 mantissa bits; no infinities; S.1111.111 is NaN; subnormals m * 2^-9), not from CUDA's
// conversions, so that the reference shares no conversion code with the kernels under test.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

namespace mla_tail_testing {

inline constexpr float kE4m3Max = 448.0f;

inline bool E4m3IsNan(uint8_t bits) { return (bits & 0x7fu) == 0x7fu; }

inline float E4m3ToFloat(uint8_t bits) {
  const bool negative = bits & 0x80u;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 15 && mantissa == 7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  }
  return negative ? -magnitude : magnitude;
}

// Round to nearest, ties to even; magnitudes beyond 448 (infinities included) saturate to +-448;
// NaN becomes 0x7f; the sign is kept (-0 and negative values that round to zero give 0x80).
inline uint8_t FloatToE4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= kE4m3Max) return sign | 0x7e;
  // The codes 0x00..0x7e hold increasing magnitudes: the two around `a`, the nearer (the even code
  // on a tie: its last bit is the mantissa's).
  static const std::array<float, 0x7f> magnitudes = [] {
    std::array<float, 0x7f> m{};
    for (int c = 0; c < 0x7f; ++c) m[c] = E4m3ToFloat(static_cast<uint8_t>(c));
    return m;
  }();
  const int above_code = static_cast<int>(
      std::upper_bound(magnitudes.begin(), magnitudes.end(), a) - magnitudes.begin());
  const int low = above_code - 1;  // magnitudes[low] <= a < magnitudes[low + 1]
  if (magnitudes[low] == a) return sign | static_cast<uint8_t>(low);
  const double below = double{a} - magnitudes[low];
  const double above = double{magnitudes[low + 1]} - a;
  const bool up = above < below || (above == below && (low & 1));
  return sign | static_cast<uint8_t>(low + (up ? 1 : 0));
}

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_E4M3_BITS_H_

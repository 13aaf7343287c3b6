#include "testing/support/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "testing/support/bf16_bits.h"

namespace mla_tail_testing {
namespace {

// The smallest float >= x and the largest float <= x (x finite, within float's range).
float FloatAtLeast(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

float FloatAtMost(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

}  // namespace

SigmoidBounds AllowedSigmoids(uint16_t gate) {
  SigmoidBounds b;
  const double g = Bf16ToFloat(gate);
  if (std::isnan(g)) {
    b.exact = std::numeric_limits<double>::quiet_NaN();
    b.low = b.high = b.nearest = std::numeric_limits<float>::quiet_NaN();
    return b;
  }
  const double e = std::exp(-g);  // +inf for g = -inf
  b.exact = 1.0 / (1.0 + e);
  double low = b.exact * (1 - kSigmoidRelativeBound) - 0x1p-149;
  double high = b.exact * (1 + kSigmoidRelativeBound) + 0x1p-149;
  // FP32's exp(-g) overflows to infinity past its largest value, and then s = 1 / inf = 0.
  constexpr double kFloatMax = std::numeric_limits<float>::max();
  if (e >= kFloatMax * (1 - kSigmoidRelativeBound)) low = 0;  // expf may overflow
  if (e > kFloatMax * (1 + kSigmoidRelativeBound)) high = 0;  // expf overflows
  b.low = FloatAtLeast(std::clamp(low, 0.0, 1.0));
  b.high = FloatAtMost(std::clamp(high, 0.0, 1.0));
  b.nearest = std::clamp(static_cast<float>(b.exact), b.low, b.high);
  return b;
}

ReferenceElement ReferenceOutput(const ReferenceInputs& in, int t, int h, int d) {
  ReferenceElement r;
  r.active = in.lengths(t / in.q) > 0;
  // Every product of two bf16 values is exact in double, and so is the sum of 512 of them for
  // the test data (integers, or multiples of 2^-14 below 2^9); otherwise it is within 2^-53.
  double acc = 0;
  for (int k = 0; k < 512; ++k) {
    acc += double{Bf16ToFloat(in.latent(t, h, k))} * double{Bf16ToFloat(in.w_uv(h, k, d))};
  }
  r.acc = acc;
  r.v = DoubleToBf16(acc);
  r.s = AllowedSigmoids(in.gate(t, h * 128 + d));
  r.out = r.active ? FloatToBf16(Bf16ToFloat(r.v) * r.s.nearest) : uint16_t{0};
  return r;
}

namespace {

std::string Describe(const ReferenceElement& ref, uint16_t got) {
  char text[320];
  std::snprintf(text, sizeof(text),
                "got 0x%04x (%g), reference 0x%04x (%g): v = 0x%04x (%g; acc %.17g), sigmoid %.17g "
                "(FP32 allowed [%.9g, %.9g]), %s",
                got, Bf16ToFloat(got), ref.out, Bf16ToFloat(ref.out), ref.v, Bf16ToFloat(ref.v),
                ref.acc, ref.s.exact, ref.s.low, ref.s.high, ref.active ? "active" : "inactive");
  return text;
}

// Whether bf16(float(v) * s) for some FP32 s in [low, high] can be `got`. The product and both
// roundings are monotonic in s, so the outputs that can occur lie between those at the ends.
bool ReachableWith(uint16_t v, const SigmoidBounds& s, uint16_t got) {
  const uint16_t at_low = FloatToBf16(Bf16ToFloat(v) * s.low);
  const uint16_t at_high = FloatToBf16(Bf16ToFloat(v) * s.high);
  if (got == at_low || got == at_high) return true;
  if (Bf16IsNan(at_low) || Bf16IsNan(at_high)) return Bf16IsNan(got);
  const float a = Bf16ToFloat(at_low), b = Bf16ToFloat(at_high), x = Bf16ToFloat(got);
  return std::min(a, b) < x && x < std::max(a, b);
}

}  // namespace

bool OutputAgrees(const ReferenceElement& ref, uint16_t got, bool exact, std::string* why) {
  if (!ref.active) {
    if (got == 0) return true;
    *why = "inactive row not +0.0: " + Describe(ref, got);
    return false;
  }
  if (Bf16IsNan(ref.v) || std::isnan(ref.s.exact)) {
    if (Bf16IsNan(got)) return true;
    *why = "expected NaN: " + Describe(ref, got);
    return false;
  }
  if (ReachableWith(ref.v, ref.s, got)) return true;
  if (!exact && std::isfinite(Bf16ToFloat(ref.v))) {
    for (bool up : {true, false}) {
      if (ReachableWith(Bf16Next(ref.v, up), ref.s, got)) return true;
    }
  }
  *why = Describe(ref, got);
  return false;
}

}  // namespace mla_tail_testing

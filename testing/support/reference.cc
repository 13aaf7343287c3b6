#include "testing/support/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "testing/support/bf16_bits.h"
#include "testing/support/e4m3_bits.h"

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

// For |g| < 2^-20, σ(g) = 1/2 + g/4 up to |g|^3 / 48, which no FP32 decision below can see; in
// double, 1/2 + g/4 loses g below 2^-52. The least FP32 >= 1/2 · (1 - r) + (g/4 · (1 - r) - 2^-149)
// (`low`) or the greatest <= 1/2 · (1 + r) + (g/4 · (1 + r) + 2^-149): the FP32 values near
// 1/2 less the exact first term are exact in double (Sterbenz), and compared with the small one.
float FloatAtLeastHalfPlus(double half_term, double small) {
  float f = FloatAtLeast(half_term);
  while (static_cast<double>(f) - half_term < small) {
    f = std::nextafter(f, std::numeric_limits<float>::infinity());
  }
  for (float below = std::nextafter(f, 0.0f); static_cast<double>(below) - half_term >= small;
       below = std::nextafter(below, 0.0f)) {
    f = below;
  }
  return f;
}
float FloatAtMostHalfPlus(double half_term, double small) {
  float f = FloatAtMost(half_term);
  while (static_cast<double>(f) - half_term > small) f = std::nextafter(f, 0.0f);
  for (float above = std::nextafter(f, 1.0f); static_cast<double>(above) - half_term <= small;
       above = std::nextafter(above, 1.0f)) {
    f = above;
  }
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
  if (std::fabs(g) < 0x1p-20) {
    constexpr double r = kSigmoidRelativeBound;
    b.exact = 0.5 + g / 4;
    b.low = FloatAtLeastHalfPlus(0.5 * (1 - r), g / 4 * (1 - r) - 0x1p-149);
    b.high = FloatAtMostHalfPlus(0.5 * (1 + r), g / 4 * (1 + r) + 0x1p-149);
    b.nearest = std::clamp(static_cast<float>(b.exact), b.low, b.high);
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
  double acc = 0, magnitude = 0;
  for (int k = 0; k < 512; ++k) {
    const uint16_t w = in.w_uv_fp8 ? DequantizeE4m3(in.w_uv_fp8(h, k, d), in.w_uv_scale(h, k / 128))
                                   : in.w_uv(h, k, d);
    const double product = double{Bf16ToFloat(in.latent(t, h, k))} * double{Bf16ToFloat(w)};
    acc += product;
    magnitude += std::fabs(product);
  }
  r.acc = acc;
  r.magnitude = magnitude;
  r.v = DoubleToBf16(acc);
  if (!in.gate) {  // no gate: out = v
    r.s = {1.0, 1.0f, 1.0f, 1.0f};
    r.out = r.active ? r.v : uint16_t{0};
    return r;
  }
  r.s = AllowedSigmoids(in.gate(t, h * 128 + d));
  r.out = r.active ? FloatToBf16(Bf16ToFloat(r.v) * r.s.nearest) : uint16_t{0};
  return r;
}

uint16_t DequantizeE4m3(uint8_t w, float scale) {
  const float product = E4m3ToFloat(w) * scale;  // one FP32 rounding
  return FloatToBf16(product);
}

QuantizedHead QuantizeHead(const uint16_t* bf16_values) {
  QuantizedHead q;
  float amax = 0;
  bool nan = false;
  for (int d = 0; d < 128; ++d) {
    const float x = Bf16ToFloat(bf16_values[d]);
    nan = nan || std::isnan(x);
    amax = std::fabs(x) > amax ? std::fabs(x) : amax;
  }
  if (nan) amax = std::numeric_limits<float>::quiet_NaN();
  q.scale = amax / kE4m3Max;
  const float inverse = kE4m3Max / amax;
  if (std::isinf(inverse)) return q;  // zeros: amax = 0, or below 448 / FLT_MAX
  for (int d = 0; d < 128; ++d) q.values[d] = FloatToE4m3(Bf16ToFloat(bf16_values[d]) * inverse);
  return q;
}

namespace {

std::string Describe(const ReferenceElement& ref, uint16_t got, bool exact) {
  char text[400];
  int n = std::snprintf(
      text, sizeof(text),
      "got 0x%04x (%g), reference 0x%04x (%g): v = 0x%04x (%g; acc %.17g, sum of |products| "
      "%.9g), sigmoid %.17g (FP32 allowed [%.9g, %.9g]), %s",
      got, Bf16ToFloat(got), ref.out, Bf16ToFloat(ref.out), ref.v, Bf16ToFloat(ref.v), ref.acc,
      ref.magnitude, ref.s.exact, ref.s.low, ref.s.high, ref.active ? "active" : "inactive");
  if (!exact && n > 0 && n < static_cast<int>(sizeof(text))) {
    const AllowedValues v = AllowedV(ref);
    std::snprintf(text + n, sizeof(text) - n, ", v allowed [0x%04x, 0x%04x] ([%g, %g])", v.low,
                  v.high, Bf16ToFloat(v.low), Bf16ToFloat(v.high));
  }
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

// bf16 values by order: the finite and infinite values as integers that order like them (both
// zeros as 0), and back (0 as +0).
int OrderOf(uint16_t b) {
  const int magnitude = b & 0x7fff;
  return (b & 0x8000) != 0 ? -magnitude : magnitude;
}
uint16_t Bf16OfOrder(int order) {
  return order >= 0 ? static_cast<uint16_t>(order) : static_cast<uint16_t>(0x8000 | -order);
}

// Whether bf16(float(v') * s') = `got` for some bf16 v' in [v.low, v.high] and FP32 s' within
// the sigmoid's bound: not every output between the least and the greatest, since a step of v'
// may exceed a step of the output. For each v', the outputs it reaches form an interval whose
// ends do not decrease as v' grows (s' >= 0): the v' to try is the largest whose interval starts
// at or below `got`. A zero output keeps its sign: it comes from a zero v' of that sign (v.low
// is -0 or negative where a negative sum within the bound rounds to bf16 -0; v.high is +0 or
// positive where a non-negative one rounds to +0) or from the nonzero v' of that sign nearest 0.
bool ReachableWithSome(const AllowedValues& v, const SigmoidBounds& s, uint16_t got) {
  const float x = Bf16ToFloat(got);
  const int low = OrderOf(v.low), high = OrderOf(v.high);
  if (x == 0) {
    const bool negative = (got & 0x8000) != 0;
    const bool zero_v =
        negative ? (v.low & 0x8000) != 0 && high >= 0 : (v.high & 0x8000) == 0 && low <= 0;
    if (zero_v && ReachableWith(negative ? 0x8000 : 0x0000, s, got)) return true;
    const int nearest = negative ? std::min(-1, high) : std::max(1, low);
    return low <= nearest && nearest <= high && ReachableWith(Bf16OfOrder(nearest), s, got);
  }
  const auto starts = [&](int order) {
    const float value = Bf16ToFloat(Bf16OfOrder(order));
    return std::min(Bf16ToFloat(FloatToBf16(value * s.low)),
                    Bf16ToFloat(FloatToBf16(value * s.high)));
  };
  if (!(starts(low) <= x)) return false;
  int lo = low, hi = high;  // starts(lo) <= x; the largest such order lies in [lo, hi]
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (starts(mid) <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return ReachableWith(Bf16OfOrder(lo), s, got);
}

}  // namespace

AllowedValues AllowedV(const ReferenceElement& ref) {
  const double bound = kAccumulationRelativeBound * ref.magnitude + kAccumulationAbsoluteBound;
  return {DoubleToBf16(ref.acc - bound), DoubleToBf16(ref.acc + bound)};
}

OutputRange AllowedOutputs(const ReferenceElement& ref, bool exact) {
  if (!ref.active) return {};
  const AllowedValues v = exact ? AllowedValues{ref.v, ref.v} : AllowedV(ref);
  // The product is monotonic in v' and in s' (s' >= 0), and so is the rounding: the extremes lie
  // at the four corners. (A corner of an infinite v' and s' = 0 is NaN, and left out.)
  OutputRange range{std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()};
  for (uint16_t value : {v.low, v.high}) {
    for (float sigmoid : {ref.s.low, ref.s.high}) {
      const float out = Bf16ToFloat(FloatToBf16(Bf16ToFloat(value) * sigmoid));
      if (std::isnan(out)) continue;
      range.least = std::min(range.least, out);
      range.greatest = std::max(range.greatest, out);
    }
  }
  return range;
}

bool OutputAgrees(const ReferenceElement& ref, uint16_t got, bool exact, std::string* why) {
  if (!ref.active) {
    if (got == 0) return true;
    *why = "inactive row not +0.0: " + Describe(ref, got, exact);
    return false;
  }
  if (Bf16IsNan(ref.v) || std::isnan(ref.s.exact)) {
    if (Bf16IsNan(got)) return true;
    *why = "expected NaN: " + Describe(ref, got, exact);
    return false;
  }
  if (ReachableWith(ref.v, ref.s, got)) return true;
  if (!exact) {
    const AllowedValues v = AllowedV(ref);
    // v' infinite (a sum near FP32's largest): its products with s' = 0 are NaN, which the
    // interval search does not order; the outputs between the extremes are accepted there.
    if (Bf16IsInf(v.low) || Bf16IsInf(v.high)) {
      const OutputRange range = AllowedOutputs(ref, /*exact=*/false);
      const float x = Bf16ToFloat(got);
      if (range.least <= x && x <= range.greatest) return true;
    } else if (ReachableWithSome(v, ref.s, got)) {
      return true;
    }
  }
  *why = Describe(ref, got, exact);
  return false;
}

}  // namespace mla_tail_testing

#include "testing/support/reference.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/e4m3_bits.h"
#include "testing/support/test_values.h"

namespace mla_tail_testing {
namespace {

TEST(Bf16BitsTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.0f + 0x1p-8f), 0x3f80);             // tie, even stays
  EXPECT_EQ(FloatToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie, odd rounds up
  EXPECT_EQ(FloatToBf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(FloatToBf16(-1.0f - 0x1p-8f), 0xbf80);
  EXPECT_EQ(FloatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBf16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBf16(3.4e38f), 0x7f80);  // overflow to +inf
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(Bf16IsNan(FloatToBf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(Bf16IsNan(FloatToBf16(BitsFloat(0x7f800001u))));  // a NaN whose top bits say inf
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16Next(0x3f80, true), 0x3f81);
  EXPECT_EQ(Bf16Next(0x3f80, false), 0x3f7f);
  EXPECT_EQ(Bf16Next(0xbf80, true), 0xbf7f);
}

TEST(Bf16BitsTest, RoundsFromDoubleOnce) {
  // Through a float, 1 + 2^-8 + 2^-30 first becomes the tie 1 + 2^-8 and then 0x3f80.
  EXPECT_EQ(FloatToBf16(static_cast<float>(1.0 + 0x1p-8 + 0x1p-30)), 0x3f80);
  EXPECT_EQ(DoubleToBf16(1.0 + 0x1p-8 + 0x1p-30), 0x3f81);
  EXPECT_EQ(DoubleToBf16(-(1.0 + 0x1p-8 + 0x1p-30)), 0xbf81);
  EXPECT_EQ(DoubleToBf16(1.0 + 0x1p-8), 0x3f80);      // tie, even stays
  EXPECT_EQ(DoubleToBf16(1.0 + 3 * 0x1p-8), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(DoubleToBf16(257.0), 0x4380);             // 256: a tie to even
  EXPECT_EQ(DoubleToBf16(259.0), 0x4382);             // 260
  EXPECT_EQ(DoubleToBf16(4095.0), 0x4580);            // 4096
  EXPECT_EQ(DoubleToBf16(0.0), 0x0000);
  EXPECT_EQ(DoubleToBf16(-0.0), 0x8000);
  EXPECT_EQ(DoubleToBf16(0x1p-133), 0x0001);      // the smallest subnormal
  EXPECT_EQ(DoubleToBf16(0x1p-134), 0x0000);      // a tie below it, to even
  EXPECT_EQ(DoubleToBf16(0x1.8p-134), 0x0001);    // above the tie
  EXPECT_EQ(DoubleToBf16(3 * 0x1p-134), 0x0002);  // 1.5 subnormal steps: a tie to even
  EXPECT_EQ(DoubleToBf16(0x1.fep127), 0x7f7f);    // the largest bf16
  EXPECT_EQ(DoubleToBf16(0x1.fe8p127), 0x7f7f);   // below the tie
  EXPECT_EQ(DoubleToBf16(0x1.ffp127), 0x7f80);    // the tie: to even, 2^128, overflow
  EXPECT_EQ(DoubleToBf16(1e300), 0x7f80);
  EXPECT_EQ(DoubleToBf16(-std::numeric_limits<double>::infinity()), 0xff80);
  EXPECT_TRUE(Bf16IsNan(DoubleToBf16(std::numeric_limits<double>::quiet_NaN())));
  // Every float agrees with the float rounding, which rounds once from a float.
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 0x3f1u) {
    const float f = BitsFloat(bits);
    ASSERT_EQ(DoubleToBf16(f), FloatToBf16(f)) << std::hex << bits;
    ASSERT_EQ(DoubleToBf16(-f), FloatToBf16(-f)) << std::hex << bits;
  }
}

TEST(TestValuesTest, RoundingIntegersAreSmallIntegers) {
  std::set<int> seen;
  for (uint64_t i = 0; i < 1 << 16; ++i) {
    const float x = Bf16ToFloat(TestValue(1, i, Values::kRoundingIntegers));
    ASSERT_TRUE(x == std::floor(x) && std::fabs(x) <= 5) << x;
    seen.insert(static_cast<int>(x));
  }
  EXPECT_EQ(seen.size(), 11u);  // -5..5
}

TEST(TestValuesTest, GatesCoverTheBranchFreeRangeAndItsEdges) {
  const std::set<uint16_t> in_range_edges = {0x0000, 0x8000, 0xC2AE, 0x4180,
                                             0x42C8, 0x7F7F, 0x0001};
  const std::set<uint16_t> below = {0xC2AF, 0xC2B1, 0xC2B2, 0xC2C8, 0xFF7F};
  const std::set<uint16_t> infinities = {0x7F80, 0xFF80};
  std::set<uint16_t> edges_seen;
  int64_t uniform = 0, below_count = 0, infinite = 0;
  constexpr int64_t kCount = 1 << 20;
  for (uint64_t i = 0; i < kCount; ++i) {
    for (Values kind : {Values::kGates, Values::kGatesWithInfinities}) {
      const uint16_t bits = TestValue(3, i, kind);
      const float g = Bf16ToFloat(bits);
      ASSERT_FALSE(std::isnan(g));
      if (in_range_edges.count(bits) + below.count(bits) + infinities.count(bits) > 0) {
        edges_seen.insert(bits);
      }
      if (infinities.count(bits) > 0) {
        ASSERT_EQ(kind, Values::kGatesWithInfinities);
        ++infinite;
      } else if (below.count(bits) > 0) {
        ++below_count;
      } else if (kind == Values::kGates && in_range_edges.count(bits) == 0) {
        ASSERT_TRUE(g >= -87.0f && g <= 16.0f) << g;
        ++uniform;
      }
    }
  }
  EXPECT_EQ(edges_seen.size(), in_range_edges.size() + below.size() + infinities.size());
  // Uniform: 1 - 1/64 - 1/512 of kGates' draws.
  EXPECT_GT(uniform, kCount * 0.97);
  // Below the branch-free range: 1 in 512 of each kind.
  EXPECT_NEAR(static_cast<double>(below_count) / (2 * kCount), 1.0 / 512, 0.0003);
  EXPECT_GT(infinite, 0);
}

TEST(TestValuesTest, UniformValuesAreInRange) {
  for (uint64_t i = 0; i < 4096; ++i) {
    const float uniform = Bf16ToFloat(TestValue(2, i, Values::kUniform));
    EXPECT_TRUE(uniform >= -1 && uniform < 1);
    const float gate = Bf16ToFloat(TestValue(2, i, Values::kUniformGates));
    EXPECT_TRUE(gate >= -8 && gate <= 8);
  }
  EXPECT_NE(TestValue(1, 0, Values::kUniform), TestValue(2, 0, Values::kUniform));
}

// Latent `latent`, W_UV 0.5 on the first four latent indices: v = 2 · latent.
ReferenceInputs SimpleInputs(uint16_t gate, uint16_t latent, int32_t length) {
  ReferenceInputs in;
  in.heads = 1;
  in.q = 1;
  in.latent = [latent](int, int, int) { return latent; };
  in.w_uv = [](int, int k, int) { return k < 4 ? FloatToBf16(0.5f) : uint16_t{0}; };
  in.gate = [gate](int, int) { return gate; };
  in.lengths = [length](int) { return length; };
  return in;
}

// Without a gate (DeepSeek-V2/V3, Kimi-K2): out = v on active rows, +0.0 on inactive ones.
TEST(ReferenceTest, WithoutAGateTheOutputIsV) {
  ReferenceInputs in = SimpleInputs(FloatToBf16(-100.0f), 0x3f80, 5);
  in.gate = nullptr;
  const ReferenceElement r = ReferenceOutput(in, 0, 0, 0);
  EXPECT_TRUE(r.active);
  EXPECT_EQ(r.s.nearest, 1.0f);
  EXPECT_EQ(r.out, FloatToBf16(2.0f));
  // A v that is no small integer comes out as it is.
  in.latent = [](int, int, int k) { return k == 0 ? FloatToBf16(1.0f) : uint16_t{0}; };
  in.w_uv = [](int, int k, int) { return k == 0 ? FloatToBf16(1.0f + 0x1p-7f) : uint16_t{0}; };
  EXPECT_EQ(ReferenceOutput(in, 0, 0, 0).out, FloatToBf16(1.0f + 0x1p-7f));
  in.lengths = [](int) { return 0; };
  in.latent = [](int, int, int) { return FloatToBf16(std::numeric_limits<float>::quiet_NaN()); };
  EXPECT_EQ(ReferenceOutput(in, 0, 0, 0).out, 0);
  std::string why;
  EXPECT_TRUE(OutputAgrees(ReferenceOutput(in, 0, 0, 0), 0, true, &why)) << why;
}

TEST(ReferenceTest, ComputesTheContractsMath) {
  const ReferenceElement r = ReferenceOutput(SimpleInputs(FloatToBf16(0.0f), 0x3f80, 5), 0, 0, 0);
  EXPECT_TRUE(r.active);
  EXPECT_EQ(r.acc, 2.0);
  EXPECT_EQ(Bf16ToFloat(r.v), 2.0f);
  EXPECT_EQ(r.s.exact, 0.5);
  EXPECT_EQ(r.s.nearest, 0.5f);
  EXPECT_EQ(Bf16ToFloat(r.out), 1.0f);
}

TEST(ReferenceTest, RoundsTheSumOnceFromTheExactValue) {
  // latent 1, 2^-8, 2^-30 on k = 0, 1, 2, W_UV 1 there: acc = 1 + 2^-8 + 2^-30, v = 0x3f81.
  ReferenceInputs in = SimpleInputs(0x7f80, 0, 1);  // gate +inf: sigmoid 1, out = v
  in.latent = [](int, int, int k) -> uint16_t {
    return k == 0 ? 0x3f80 : k == 1 ? 0x3b80 : k == 2 ? 0x3080 : 0;
  };
  in.w_uv = [](int, int k, int) -> uint16_t { return k < 3 ? 0x3f80 : 0; };
  const ReferenceElement r = ReferenceOutput(in, 0, 0, 0);
  EXPECT_EQ(r.acc, 1.0 + 0x1p-8 + 0x1p-30);
  EXPECT_EQ(r.v, 0x3f81);
  EXPECT_EQ(r.out, 0x3f81);
}

TEST(ReferenceTest, InactiveRowsAreZeroWhateverTheyHold) {
  const uint16_t nan = 0xffff, inf = 0x7f80;
  for (int32_t length : {0, -1, -1000}) {
    for (uint16_t poison : {nan, inf, uint16_t{0xff80}}) {
      const ReferenceElement r = ReferenceOutput(SimpleInputs(poison, poison, length), 0, 0, 0);
      EXPECT_FALSE(r.active);
      EXPECT_EQ(r.out, 0x0000) << "length " << length << " poison " << poison;
    }
  }
}

TEST(ReferenceTest, ActiveRowsPropagateNanAndSaturateInfiniteGates) {
  EXPECT_TRUE(Bf16IsNan(ReferenceOutput(SimpleInputs(0xffff, 0x3f80, 1), 0, 0, 0).out));
  EXPECT_TRUE(Bf16IsNan(ReferenceOutput(SimpleInputs(0, 0xffff, 1), 0, 0, 0).out));
  // sigmoid(+inf) = 1, sigmoid(-inf) = 0.
  EXPECT_EQ(Bf16ToFloat(ReferenceOutput(SimpleInputs(0x7f80, 0x3f80, 1), 0, 0, 0).out), 2.0f);
  EXPECT_EQ(ReferenceOutput(SimpleInputs(0xff80, 0x3f80, 1), 0, 0, 0).out, 0x0000);
  // A negative v times sigmoid(-inf) is -0.0: the sign is the product's.
  EXPECT_EQ(ReferenceOutput(SimpleInputs(0xff80, 0xbf80, 1), 0, 0, 0).out, 0x8000);
  std::string why;
  EXPECT_FALSE(
      OutputAgrees(ReferenceOutput(SimpleInputs(0xff80, 0xbf80, 1), 0, 0, 0), 0x0000, true, &why));
}

TEST(ReferenceTest, SigmoidIsNotRoundedToBf16) {
  // Some v * sigmoid(g) rounds differently from v * bf16(sigmoid(g)); the contract keeps FP32.
  int differing = 0;
  for (int gk = -64; gk <= 64; ++gk) {
    for (int vk = 1; vk < 128; ++vk) {
      const float g = gk / 16.0f, v = vk / 32.0f;
      const float s = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(g))));
      const uint16_t fp32 = FloatToBf16(v * s);
      const uint16_t rounded = FloatToBf16(v * Bf16ToFloat(FloatToBf16(s)));
      if (fp32 == rounded) continue;
      ++differing;
      ReferenceInputs in =
          SimpleInputs(FloatToBf16(g), FloatToBf16(v / 2), 1);  // v = 4 * v/2 * 0.5
      const ReferenceElement r = ReferenceOutput(in, 0, 0, 0);
      ASSERT_EQ(Bf16ToFloat(r.v), v);
      EXPECT_EQ(r.out, fp32);
      std::string why;
      EXPECT_FALSE(OutputAgrees(r, rounded, true, &why)) << g << " " << v;
    }
  }
  EXPECT_GT(differing, 0);
}

// The sigmoid's bound against the double-precision sigmoid, for every bf16 gate: the ends are
// FP32 values around the exact one, 2^-21 apart relative at most (the bound) and at least one
// FP32 step; FP32's own formula (the host's expf, within an ulp) lies inside; past FP32's exp
// range the only allowed value is 0.
TEST(ReferenceTest, SigmoidBoundsAroundTheExactValueForEveryGate) {
  int nan = 0, zero_only = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const SigmoidBounds s = AllowedSigmoids(static_cast<uint16_t>(bits));
    const double g = Bf16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(g)) {
      EXPECT_TRUE(std::isnan(s.exact) && std::isnan(s.low) && std::isnan(s.high));
      ++nan;
      continue;
    }
    ASSERT_LE(s.low, s.nearest) << g;
    ASSERT_LE(s.nearest, s.high) << g;
    ASSERT_GE(s.low, 0.0f);
    ASSERT_LE(s.high, 1.0f);
    if (s.high == 0) {
      EXPECT_LT(g, -88.7) << "sigmoid pinned to 0 above FP32's exp range";
      ++zero_only;
      continue;
    }
    EXPECT_LE(s.low, s.exact) << g;
    EXPECT_GE(s.high, s.exact) << g;
    EXPECT_LE(s.high - s.low, 2 * kSigmoidRelativeBound * s.exact + 0x1p-148) << g;
    const float fp32 = 1.0f / (1.0f + std::exp(-static_cast<float>(g)));
    EXPECT_TRUE(fp32 >= s.low && fp32 <= s.high)
        << "g " << g << ": FP32 " << fp32 << " outside [" << s.low << ", " << s.high << "]";
  }
  EXPECT_EQ(nan, 2 * 127);
  EXPECT_GT(zero_only, 0);
  const SigmoidBounds minus_inf = AllowedSigmoids(0xff80);
  EXPECT_EQ(minus_inf.low, 0.0f);
  EXPECT_EQ(minus_inf.high, 0.0f);
  const SigmoidBounds plus_inf = AllowedSigmoids(0x7f80);
  EXPECT_EQ(plus_inf.high, 1.0f);
  EXPECT_EQ(plus_inf.nearest, 1.0f);
  const SigmoidBounds below = AllowedSigmoids(0xC2B1);  // -88.5: a subnormal sigmoid
  EXPECT_GT(below.low, 0.0f);
  EXPECT_LT(below.high, std::numeric_limits<float>::min());
  EXPECT_EQ(AllowedSigmoids(0xC2B2).high, 0.0f);  // -89: expf overflows
}

TEST(ReferenceTest, ExactComparisonPinsVAndAllowsOnlyTheSigmoidsBound) {
  // v = 2, gate 30: sigmoid 1 - 9.4e-14, so the output is 2 whatever FP32 s the bound allows.
  const ReferenceElement r = ReferenceOutput(SimpleInputs(FloatToBf16(30.0f), 0x3f80, 1), 0, 0, 0);
  ASSERT_EQ(r.s.nearest, 1.0f);
  std::string why;
  EXPECT_TRUE(OutputAgrees(r, r.out, true, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(r.out, true), true, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(r.out, false), true, &why));
  // Not exact: the accumulation bound, 2^-13 of the 2 the products' magnitudes add up to, lies
  // far inside half an ulp of 2: the neighbours stay refused.
  EXPECT_TRUE(OutputAgrees(r, r.out, false, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(r.out, true), false, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(r.out, false), false, &why));
  EXPECT_NE(why.find("reference 0x4000"), std::string::npos) << why;
  EXPECT_FALSE(OutputAgrees(r, 0xffff, false, &why));

  const ReferenceElement inactive = ReferenceOutput(SimpleInputs(0xffff, 0xffff, 0), 0, 0, 0);
  EXPECT_TRUE(OutputAgrees(inactive, 0x0000, false, &why));
  EXPECT_FALSE(OutputAgrees(inactive, 0x8000, false, &why));  // -0.0 is not +0.0
  EXPECT_FALSE(OutputAgrees(inactive, 0xffff, false, &why));

  // Where the output sits on a rounding boundary within the bound, both sides are allowed, and
  // nothing further: a few v against every fifth gate.
  int both_sides = 0;
  for (uint16_t v : {uint16_t{0x437f}, uint16_t{0x4040}, uint16_t{0x429a}, uint16_t{0xc349}}) {
    for (uint32_t bits = 0; bits <= 0xffff; bits += 5) {
      if (Bf16IsNan(static_cast<uint16_t>(bits))) continue;
      ReferenceElement e;
      e.active = true;
      e.v = v;  // 255, 3, 77, -201
      e.s = AllowedSigmoids(static_cast<uint16_t>(bits));
      e.out = FloatToBf16(Bf16ToFloat(e.v) * e.s.nearest);
      const uint16_t low = FloatToBf16(Bf16ToFloat(e.v) * e.s.low);
      const uint16_t high = FloatToBf16(Bf16ToFloat(e.v) * e.s.high);
      ASSERT_TRUE(OutputAgrees(e, low, true, &why)) << why;
      ASSERT_TRUE(OutputAgrees(e, high, true, &why)) << why;
      both_sides += low != high;
      // Beyond the ends, in the direction the product moves: refused.
      const uint16_t beyond_high = Bf16Next(high, v < 0x8000);
      const uint16_t beyond_low = Bf16Next(low, v >= 0x8000);
      ASSERT_FALSE(OutputAgrees(e, beyond_high, true, &why)) << std::hex << bits << " " << v;
      ASSERT_FALSE(OutputAgrees(e, beyond_low, true, &why)) << std::hex << bits << " " << v;
    }
  }
  EXPECT_GT(both_sides, 0);
}

// Data whose sums FP32 cannot hold exactly: v' may be bf16 of any FP32 sum within
// 2^-13 · Σ|products| (+ 2^-117) of the exact one, which at cancellation spans many ulps of v.
TEST(ReferenceTest, NonExactComparisonAllowsTheAccumulationBound) {
  std::string why;
  // 256 - 255 = 1 from products of magnitude 511: the bound is 0.0624, so v' runs from
  // bf16(0.9376) = 0.9375 (0x3f70) to bf16(1.0624) = 1.0625 (0x3f88). Gate +inf: out = v'.
  ReferenceInputs in = SimpleInputs(0x7f80, 0, 1);
  in.latent = [](int, int, int k) -> uint16_t { return k == 0 ? 0x4380 : k == 1 ? 0xc37f : 0; };
  in.w_uv = [](int, int k, int) -> uint16_t { return k < 2 ? 0x3f80 : 0; };
  ReferenceElement r = ReferenceOutput(in, 0, 0, 0);
  ASSERT_EQ(r.acc, 1.0);
  ASSERT_EQ(r.magnitude, 511.0);
  EXPECT_EQ(AllowedV(r).low, 0x3f70);
  EXPECT_EQ(AllowedV(r).high, 0x3f88);
  for (uint16_t got = 0x3f70; got <= 0x3f88; ++got) {
    EXPECT_TRUE(OutputAgrees(r, got, false, &why)) << std::hex << got << ": " << why;
    EXPECT_EQ(OutputAgrees(r, got, true, &why), got == 0x3f80) << std::hex << got;
  }
  EXPECT_FALSE(OutputAgrees(r, 0x3f6f, false, &why));
  EXPECT_NE(why.find("v allowed [0x3f70, 0x3f88]"), std::string::npos) << why;
  EXPECT_FALSE(OutputAgrees(r, 0x3f89, false, &why));
  EXPECT_FALSE(OutputAgrees(r, 0xbf80, false, &why));

  // 256 - 256 = 0: v' may take either sign, up to 2^-4 in magnitude; with a gate of 0 the
  // outputs span half of that.
  in.latent = [](int, int, int k) -> uint16_t { return k == 0 ? 0x4380 : k == 1 ? 0xc380 : 0; };
  in.gate = [](int, int) { return FloatToBf16(0.0f); };
  r = ReferenceOutput(in, 0, 0, 0);
  ASSERT_EQ(r.acc, 0.0);
  EXPECT_EQ(AllowedV(r).low, FloatToBf16(-0.0625f));
  EXPECT_EQ(AllowedV(r).high, FloatToBf16(0.0625f));
  for (float out : {0.0f, -0.0f, 0.03125f, -0.03125f, 1e-30f}) {
    EXPECT_TRUE(OutputAgrees(r, FloatToBf16(out), false, &why)) << out << ": " << why;
  }
  for (float out : {0.0625f, -0.0625f, 1.0f}) {
    EXPECT_FALSE(OutputAgrees(r, FloatToBf16(out), false, &why)) << out;
  }
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(FloatToBf16(0.03125f), true), false, &why));
  EXPECT_TRUE(OutputAgrees(r, 0x0000, true, &why)) << why;
  EXPECT_FALSE(OutputAgrees(r, FloatToBf16(0.03125f), true, &why));
}

// The outputs bf16(float(v') * s') for every bf16 v' some FP32 sum within the accumulation bound
// rounds to, and every FP32 s' within the sigmoid's bound, enumerated: the set OutputAgrees must
// accept, no more (steps of v' larger than the output's leave gaps; zeros keep their sign) and
// no less.
std::vector<bool> EnumeratedOutputs(const ReferenceElement& e) {
  const AllowedValues v = AllowedV(e);
  const float low = Bf16ToFloat(v.low), high = Bf16ToFloat(v.high);
  std::vector<bool> reached(0x10000, false);
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t b = static_cast<uint16_t>(bits);
    if (Bf16IsNan(b)) continue;
    const float value = Bf16ToFloat(b);
    bool possible = low <= value && value <= high;
    if (b == 0x8000) possible = (v.low & 0x8000) != 0 && high >= 0;  // a negative sum near 0
    if (b == 0x0000) possible = (v.high & 0x8000) == 0 && low <= 0;  // a non-negative one
    if (!possible) continue;
    for (float sigmoid = e.s.low; sigmoid <= e.s.high; sigmoid = std::nextafter(sigmoid, 2.0f)) {
      reached[FloatToBf16(value * sigmoid)] = true;
    }
  }
  return reached;
}

TEST(ReferenceTest, NonExactComparisonAcceptsExactlyTheReachableOutputs) {
  struct Case {
    double acc, magnitude;
    float gate;
  };
  std::vector<Case> cases = {
      {4.0078125, 92.18, 1.0f},  // v' in {4, 4.03125}: 4.015625 · s unreachable between them
      {1.0, 1.0, -100.0f},       // s = 0: only +0 (the sum is positive)
      {-1.0, 1.0, -100.0f},      // only -0
      {0.0, 1.0, 0.5f},          // v' of either sign near 0
      {0x1p-140, 0x1p-139, 3.0f}, {-0x1p-140, 0x1p-139, 3.0f},
  };
  uint64_t seed = 7;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull; };
  for (int i = 0; i < 120; ++i) {
    const double magnitude = std::ldexp(1.0 + (next() >> 40) * 0x1p-24, int(next() % 40) - 20);
    const double share = (next() % 5 == 0) ? 0.0 : double(next() >> 11) * 0x1p-53;  // of M
    const double acc = (next() & 1 ? -1 : 1) * magnitude * share;
    const float gate = (next() % 7 == 0) ? 0.0f : float(int(next() % 1600) - 800) / 10;
    cases.push_back({acc, magnitude, gate});
  }
  std::string why;
  for (const Case& c : cases) {
    ReferenceElement e;
    e.active = true;
    e.acc = c.acc;
    e.magnitude = c.magnitude;
    e.v = DoubleToBf16(c.acc);
    e.s = AllowedSigmoids(FloatToBf16(c.gate));
    e.out = FloatToBf16(Bf16ToFloat(e.v) * e.s.nearest);
    const std::vector<bool> reached = EnumeratedOutputs(e);
    int accepted = 0;
    for (uint32_t got = 0; got <= 0xffff; ++got) {
      if (Bf16IsNan(static_cast<uint16_t>(got))) continue;
      const bool agrees = OutputAgrees(e, static_cast<uint16_t>(got), false, &why);
      ASSERT_EQ(agrees, static_cast<bool>(reached[got]))
          << "acc " << c.acc << " M " << c.magnitude << " gate " << c.gate << " got 0x" << std::hex
          << got;
      accepted += agrees;
    }
    EXPECT_GT(accepted, 0);
  }
  // The gap: 0x403c lies between the outputs of v' = 4 and v' = 4.03125 at gate 1.
  ReferenceElement gap;
  gap.active = true;
  gap.acc = 4.0078125;
  gap.magnitude = 92.18;
  gap.v = DoubleToBf16(gap.acc);
  gap.s = AllowedSigmoids(FloatToBf16(1.0f));
  EXPECT_FALSE(OutputAgrees(gap, 0x403c, false, &why));
}

// For tiny gates the bound is that of 1/2 + g/4, which double precision would round to 1/2.
TEST(ReferenceTest, SigmoidBoundsOfTinyGatesKeepTheirSlope) {
  const SigmoidBounds up = AllowedSigmoids(0x2000);  // 2^-63
  EXPECT_EQ(up.low, 0x1.fffff2p-2f);
  EXPECT_EQ(up.high, 0x1.000008p-1f);
  const SigmoidBounds down = AllowedSigmoids(0xa000);  // -2^-63
  EXPECT_EQ(down.low, 0x1.fffffp-2f);
  EXPECT_EQ(down.high, 0x1.000006p-1f);
}

TEST(E4m3BitsTest, DecodesEveryCode) {
  EXPECT_EQ(E4m3ToFloat(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(E4m3ToFloat(0x80)));
  EXPECT_EQ(E4m3ToFloat(0x80), 0.0f);
  EXPECT_EQ(E4m3ToFloat(0x01), 0x1p-9f);  // the smallest subnormal
  EXPECT_EQ(E4m3ToFloat(0x07), 7 * 0x1p-9f);
  EXPECT_EQ(E4m3ToFloat(0x08), 0x1p-6f);  // the smallest normal
  EXPECT_EQ(E4m3ToFloat(0x38), 1.0f);
  EXPECT_EQ(E4m3ToFloat(0x3c), 1.5f);
  EXPECT_EQ(E4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(E4m3ToFloat(0xfe), -448.0f);
  EXPECT_EQ(E4m3ToFloat(0xb9), -1.125f);
  EXPECT_TRUE(std::isnan(E4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(E4m3ToFloat(0xff)));
  for (int c = 0; c < 0x7e; ++c) {
    EXPECT_LT(E4m3ToFloat(c), E4m3ToFloat(c + 1)) << c;
    EXPECT_EQ(E4m3ToFloat(c | 0x80), -E4m3ToFloat(c)) << c;
    EXPECT_FALSE(E4m3IsNan(c));
  }
}

TEST(E4m3BitsTest, RoundsToNearestEvenAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    if (E4m3IsNan(c)) continue;
    EXPECT_EQ(FloatToE4m3(E4m3ToFloat(c)), c) << c;  // every value is its own code
  }
  EXPECT_EQ(FloatToE4m3(1.0625f), 0x38);             // tie between 1 and 1.125: even
  EXPECT_EQ(FloatToE4m3(1.1875f), 0x3a);             // tie between 1.125 and 1.25: even
  EXPECT_EQ(FloatToE4m3(1.0625f + 0x1p-20f), 0x39);  // above the tie
  EXPECT_EQ(FloatToE4m3(-1.0625f - 0x1p-20f), 0xb9);
  EXPECT_EQ(FloatToE4m3(0.5f * 0x1p-9f), 0x00);    // tie between 0 and 2^-9: even
  EXPECT_EQ(FloatToE4m3(1.5f * 0x1p-9f), 0x02);    // tie between subnormals 1 and 2
  EXPECT_EQ(FloatToE4m3(-0.25f * 0x1p-9f), 0x80);  // a negative value rounding to -0
  EXPECT_EQ(FloatToE4m3(7.5f * 0x1p-9f), 0x08);    // the largest subnormal's tie: 2^-6
  EXPECT_EQ(FloatToE4m3(460.0f), 0x7e);            // above 448: saturates
  EXPECT_EQ(FloatToE4m3(1e30f), 0x7e);
  EXPECT_EQ(FloatToE4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(FloatToE4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(FloatToE4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(FloatToE4m3(432.0f), 0x7e);  // tie between 416 and 448: even (448)
  EXPECT_EQ(FloatToE4m3(431.0f), 0x7d);
}

TEST(ReferenceTest, DequantizesE4m3InFp32ThenBf16) {
  EXPECT_EQ(DequantizeE4m3(0x7e, 0.5f), FloatToBf16(224.0f));
  EXPECT_EQ(DequantizeE4m3(0xfe, 2.0f), FloatToBf16(-896.0f));
  EXPECT_EQ(DequantizeE4m3(0x01, 0x1p-3f), FloatToBf16(0x1p-12f));  // a subnormal, scaled
  EXPECT_EQ(DequantizeE4m3(0x80, 3.0f), 0x8000);                    // -0 stays -0
  EXPECT_EQ(DequantizeE4m3(0x3c, 0.0f), 0x0000);                    // a zero scale
  EXPECT_TRUE(Bf16IsNan(DequantizeE4m3(0x7f, 1.0f)));
  EXPECT_TRUE(Bf16IsNan(DequantizeE4m3(0xff, 0.0f)));  // NaN times a zero scale
  // An odd scale: the FP32 product 1.5 * 1.00390625 = 1.505859375 rounds to bf16 1.5078125.
  EXPECT_EQ(DequantizeE4m3(0x3c, 1.00390625f), FloatToBf16(1.505859375f));
  EXPECT_EQ(Bf16ToFloat(DequantizeE4m3(0x3c, 1.00390625f)), 1.5078125f);
  // Every finite code times an odd scale: bf16 of the FP32 product.
  const float scale = 0.0123456789f;
  for (int c = 0; c < 256; ++c) {
    if (E4m3IsNan(c)) continue;
    EXPECT_EQ(DequantizeE4m3(c, scale), FloatToBf16(E4m3ToFloat(c) * scale)) << c;
  }
}

// e4m3 W_UV: 1.0 (0x38) on the first four latent indices with block 0's scale 0.5 is W_UV 0.5:
// v = 2 exactly, as SimpleInputs gives with bf16 W_UV.
ReferenceInputs Fp8Inputs(uint8_t w, float scale, int32_t length) {
  ReferenceInputs in = SimpleInputs(FloatToBf16(0.0f), 0x3f80, length);
  in.w_uv = nullptr;
  in.w_uv_fp8 = [w](int, int k, int) { return k < 4 ? w : uint8_t{0}; };
  in.w_uv_scale = [scale](int, int j) { return j == 0 ? scale : 1e30f; };
  return in;
}

TEST(ReferenceTest, ComputesTheContractsMathWithE4m3Weights) {
  const ReferenceElement r = ReferenceOutput(Fp8Inputs(0x38, 0.5f, 1), 0, 0, 0);
  EXPECT_EQ(r.acc, 2.0);
  EXPECT_EQ(Bf16ToFloat(r.out), 1.0f);
  EXPECT_TRUE(Bf16IsNan(ReferenceOutput(Fp8Inputs(0x7f, 0.5f, 1), 0, 0, 0).out));
  EXPECT_TRUE(Bf16IsNan(ReferenceOutput(Fp8Inputs(0xff, 0.5f, 1), 0, 0, 0).out));
  EXPECT_EQ(ReferenceOutput(Fp8Inputs(0x7f, 0.5f, 0), 0, 0, 0).out, 0x0000);  // inactive
  EXPECT_EQ(ReferenceOutput(Fp8Inputs(0x38, 0.0f, 1), 0, 0, 0).out, 0x0000);  // zero scale
}

TEST(ReferenceTest, QuantizesAHeadFromItsBf16Values) {
  uint16_t x[128];
  for (uint16_t& v : x) v = 0x0000;
  QuantizedHead q = QuantizeHead(x);
  EXPECT_EQ(q.scale, 0.0f);
  for (uint8_t y : q.values) EXPECT_EQ(y, 0x00);
  x[5] = 0x8000;  // -0: still all zeros, scale 0
  q = QuantizeHead(x);
  EXPECT_EQ(q.scale, 0.0f);
  EXPECT_EQ(q.values[5], 0x00);

  x[0] = FloatToBf16(1.0f);   // amax: scale 1/448, the inverse 448
  x[1] = FloatToBf16(-0.5f);  // -224
  x[2] = FloatToBf16(0.01f);  // 4.48 (bf16 0.010009765625: 4.484375) -> 4.5
  x[3] = FloatToBf16(-1.0f);  // -448
  q = QuantizeHead(x);
  EXPECT_EQ(q.scale, 1.0f / 448.0f);
  EXPECT_EQ(q.values[0], 0x7e);
  EXPECT_EQ(q.values[1], 0xf6);
  EXPECT_EQ(q.values[2], FloatToE4m3(Bf16ToFloat(x[2]) * 448.0f));
  EXPECT_EQ(E4m3ToFloat(q.values[2]), 4.5f);
  EXPECT_EQ(q.values[3], 0xfe);
  EXPECT_EQ(q.values[5], 0x80);  // -0 * 448

  uint16_t tiny[128] = {};  // amax 2^-127 (a bf16 subnormal): 448 / amax overflows, so zeros
  tiny[3] = 0x0040;
  tiny[4] = 0x8020;
  q = QuantizeHead(tiny);
  EXPECT_EQ(q.scale, 0x1p-127f / 448.0f);
  EXPECT_GT(q.scale, 0.0f);
  for (uint8_t y : q.values) EXPECT_EQ(y, 0x00);
  tiny[3] = 0x0480;  // amax 2^-118: 448 / amax is finite, the values quantized
  q = QuantizeHead(tiny);
  EXPECT_EQ(q.values[3], 0x7e);
  EXPECT_EQ(q.values[4], 0xae);  // -2^-128 * 448 * 2^118 = -0.4375
  EXPECT_EQ(q.values[4], FloatToE4m3(-0x1p-128f * (448.0f / 0x1p-118f)));

  x[7] = 0x7fc0;  // NaN: the scale and every value NaN
  q = QuantizeHead(x);
  EXPECT_TRUE(std::isnan(q.scale));
  for (uint8_t y : q.values) EXPECT_TRUE(E4m3IsNan(y));
  x[7] = 0x7f80;  // +inf: scale inf, finite values 0, the infinity NaN
  q = QuantizeHead(x);
  EXPECT_EQ(q.scale, std::numeric_limits<float>::infinity());
  EXPECT_EQ(q.values[0], 0x00);
  EXPECT_EQ(q.values[1], 0x80);
  EXPECT_TRUE(E4m3IsNan(q.values[7]));
}

}  // namespace
}  // namespace mla_tail_testing

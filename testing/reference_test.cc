#include "testing/support/reference.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "testing/support/bf16_bits.h"
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
  EXPECT_TRUE(OutputAgrees(r, Bf16Next(r.out, true), false, &why));
  EXPECT_TRUE(OutputAgrees(r, Bf16Next(r.out, false), false, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(Bf16Next(r.out, true), true), false, &why));
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

}  // namespace
}  // namespace mla_tail_testing

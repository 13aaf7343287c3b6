#include "testing/support/reference.h"

#include <cmath>
#include <limits>
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

TEST(TestValuesTest, AreExactInBf16AndInRange) {
  for (uint64_t i = 0; i < 4096; ++i) {
    const float integer = Bf16ToFloat(TestValue(1, i, Values::kSmallIntegers));
    EXPECT_TRUE(integer >= -2 && integer <= 2 && integer == std::floor(integer));
    const float uniform = Bf16ToFloat(TestValue(2, i, Values::kUniform));
    EXPECT_TRUE(uniform >= -1 && uniform < 1);
    const float gate = Bf16ToFloat(TestValue(3, i, Values::kExactGates));
    EXPECT_TRUE(gate == 0 || gate == 30 || gate == -100);
  }
  EXPECT_NE(TestValue(1, 0, Values::kUniform), TestValue(2, 0, Values::kUniform));
}

// Latent 1, W_UV 0.5 on the first four latent indices: v = 2 exactly.
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
  EXPECT_EQ(r.s, 1.0f);
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
  EXPECT_EQ(r.s, 0.5f);
  EXPECT_EQ(Bf16ToFloat(r.out), 1.0f);
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
}

TEST(ReferenceTest, SigmoidIsNotRoundedToBf16) {
  // Some v * sigmoid(g) rounds differently from v * bf16(sigmoid(g)); the contract keeps FP32.
  int differing = 0;
  for (int gk = -64; gk <= 64; ++gk) {
    for (int vk = 1; vk < 128; ++vk) {
      const float g = gk / 16.0f, v = vk / 32.0f;
      const float s = 1.0f / (1.0f + std::exp(-g));
      const uint16_t fp32 = FloatToBf16(v * s);
      const uint16_t rounded = FloatToBf16(v * Bf16ToFloat(FloatToBf16(s)));
      if (fp32 == rounded) continue;
      ++differing;
      ReferenceInputs in =
          SimpleInputs(FloatToBf16(g), FloatToBf16(v / 2), 1);  // v = 4 * v/2 * 0.5
      const ReferenceElement r = ReferenceOutput(in, 0, 0, 0);
      ASSERT_EQ(Bf16ToFloat(r.v), v);
      EXPECT_EQ(r.out, fp32);
    }
  }
  EXPECT_GT(differing, 0);
}

TEST(ReferenceTest, ToleranceIsOneUlpOfV) {
  const ReferenceElement r = ReferenceOutput(SimpleInputs(FloatToBf16(30.0f), 0x3f80, 1), 0, 0, 0);
  ASSERT_EQ(r.s, 1.0f);
  std::string why;
  EXPECT_TRUE(OutputAgrees(r, r.out, true, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(r.out, true), true, &why));
  EXPECT_TRUE(OutputAgrees(r, Bf16Next(r.out, true), false, &why));
  EXPECT_TRUE(OutputAgrees(r, Bf16Next(r.out, false), false, &why));
  EXPECT_FALSE(OutputAgrees(r, Bf16Next(Bf16Next(r.out, true), true), false, &why));
  EXPECT_NE(why.find("reference 0x4000"), std::string::npos) << why;
  EXPECT_FALSE(OutputAgrees(r, 0xffff, false, &why));

  const ReferenceElement inactive = ReferenceOutput(SimpleInputs(0xffff, 0xffff, 0), 0, 0, 0);
  EXPECT_TRUE(OutputAgrees(inactive, 0x0000, false, &why));
  EXPECT_FALSE(OutputAgrees(inactive, 0x8000, false, &why));  // -0.0 is not +0.0
  EXPECT_FALSE(OutputAgrees(inactive, 0xffff, false, &why));
}

}  // namespace
}  // namespace mla_tail_testing

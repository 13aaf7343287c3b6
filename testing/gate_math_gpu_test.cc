// The gate math of every fused kernel and BmmGateKernel, over all 65536 bf16 gates: the sigmoid
// within the contract's bound of the double-precision sigmoid (reference.h), and the branch-free
// computation equal to the IEEE division bit for bit wherever it claims to, leaving only gates
// below -87 (and NaN) to the general path.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/gate_math.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/reference.h"

namespace mla_tail_testing {
namespace {

using GateMathGpuTest = GpuStreamTest<>;

TEST_F(GateMathGpuTest, BranchFreeGateEqualsDivisionForEveryBf16Gate) {
  if (!StreamReady()) return;
  GateMathCounts counts;
  ASSERT_EQ(CheckGateMath(stream_, &counts), cudaSuccess);
  EXPECT_EQ(counts.pairs, 65536 * 2 * 11);
  EXPECT_EQ(counts.in_range_mismatch, 0)
      << "first gate bits 0x" << std::hex << counts.first_mismatch_gate;
  EXPECT_EQ(counts.gate_pairs_mismatch, 0)
      << "first gate bits 0x" << std::hex << counts.first_mismatch_gate;
  EXPECT_EQ(counts.sigmoid_first_mismatch, 0)
      << "first gate bits 0x" << std::hex << counts.first_mismatch_gate;
  // Active cases only: NaN gates (2 x 254 bf16 NaNs a half) and gates below about -87.3.
  EXPECT_GT(counts.out_of_range, 0);
  EXPECT_EQ(counts.out_of_range_above, 0);
}

// The kernels' FP32 sigmoid against the exact one in double, for every bf16 gate: within
// kSigmoidRelativeBound (2^-21 relative, plus 2^-149 for subnormal sigmoids), 0 where FP32's exp
// overflows, NaN for NaN. The widest distance seen is recorded, in units of the exact value.
TEST_F(GateMathGpuTest, SigmoidWithinTheBoundOfTheExactValueForEveryBf16Gate) {
  if (!StreamReady()) return;
  std::vector<float> sigmoids(65536);
  ASSERT_EQ(SigmoidOfEveryGate(stream_, sigmoids.data()), cudaSuccess);
  int outside = 0;
  double widest = 0;
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const SigmoidBounds allowed = AllowedSigmoids(static_cast<uint16_t>(bits));
    const float s = sigmoids[bits];
    if (std::isnan(allowed.exact)) {
      EXPECT_TRUE(std::isnan(s)) << std::hex << bits;
      continue;
    }
    if (allowed.exact > 0x1p-126)
      widest = std::max(widest, std::fabs(s - allowed.exact) / allowed.exact);
    if (s >= allowed.low && s <= allowed.high) continue;
    if (++outside <= 10) {
      ADD_FAILURE() << "gate " << Bf16ToFloat(static_cast<uint16_t>(bits)) << " (0x" << std::hex
                    << bits << std::dec << "): sigmoid " << s << ", exact " << allowed.exact
                    << ", allowed [" << allowed.low << ", " << allowed.high << "]";
    }
  }
  EXPECT_EQ(outside, 0);
  RecordProperty("widest_relative_distance", std::to_string(widest));
  EXPECT_LE(widest, kSigmoidRelativeBound);
}

}  // namespace
}  // namespace mla_tail_testing

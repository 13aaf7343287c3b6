// The gate math of every fused kernel and BmmGateKernel, over all 65536 bf16 gates: the branch-free
// computation equals the IEEE division bit for bit wherever it claims to, and leaves only gates
// below -87 (and NaN) to the general path.

#include "gtest/gtest.h"
#include "testing/support/gate_math.h"
#include "testing/support/gpu_stream_test.h"

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

}  // namespace
}  // namespace mla_tail_testing

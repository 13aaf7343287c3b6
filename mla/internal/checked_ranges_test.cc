// The pointer checks' cache of reachable ranges (CPU only: no CUDA call).

#include "mla/internal/checked_ranges.h"

#include "gtest/gtest.h"

namespace mla_tail::internal {
namespace {

TEST(CheckedRangesTest, CoversWhatLiesInOneRange) {
  CheckedRanges r;
  EXPECT_FALSE(r.Covers(0x1000, 0x1010));
  r.Add({0x1000, 0x2000, 0x1000});
  EXPECT_TRUE(r.Covers(0x1000, 0x2000));
  EXPECT_TRUE(r.Covers(0x1800, 0x1810));
  EXPECT_FALSE(r.Covers(0x0ff0, 0x1010));  // starts before
  EXPECT_FALSE(r.Covers(0x1ff0, 0x2001));  // ends one byte past
  EXPECT_FALSE(r.Covers(0x2000, 0x2010));  // just after
}

TEST(CheckedRangesTest, ChainsMappingsOfOneReservationOnly) {
  CheckedRanges r;
  // Two mappings of one reservation, end to end.
  r.Add({0x10000, 0x20000, 0x10000});
  r.Add({0x20000, 0x30000, 0x10000});
  EXPECT_TRUE(r.Covers(0x18000, 0x28000));
  EXPECT_TRUE(r.Covers(0x10000, 0x30000));
  // Two allocations that happen to be adjacent: a call may not run from one into the next.
  r.Add({0x30000, 0x40000, 0x30000});
  EXPECT_TRUE(r.Covers(0x30000, 0x40000));
  EXPECT_FALSE(r.Covers(0x28000, 0x38000));
  // A gap breaks the chain.
  r.Add({0x50000, 0x60000, 0x10000});
  EXPECT_FALSE(r.Covers(0x38000, 0x58000));
}

TEST(CheckedRangesTest, AnOverlappingRangeReplacesWhatWasFreed) {
  CheckedRanges r;
  r.Add({0x1000, 0x3000, 0x1000});
  r.Add({0x5000, 0x6000, 0x5000});
  // Memory at 0x2000.. reallocated with another extent: the old range is dropped.
  r.Add({0x2000, 0x2800, 0x2000});
  EXPECT_EQ(r.size(), 2u);
  EXPECT_FALSE(r.Covers(0x1000, 0x1100));
  EXPECT_TRUE(r.Covers(0x2000, 0x2800));
  EXPECT_FALSE(r.Covers(0x2000, 0x2900));
  EXPECT_TRUE(r.Covers(0x5000, 0x6000));
}

TEST(CheckedRangesTest, StartsAgainPastItsBound) {
  CheckedRanges r;
  for (size_t i = 0; i < CheckedRanges::kMaxRanges; ++i) {
    const uintptr_t begin = 0x100000 + i * 0x1000;
    r.Add({begin, begin + 0x800, begin});
  }
  EXPECT_EQ(r.size(), CheckedRanges::kMaxRanges);
  r.Add({0x10, 0x20, 0x10});
  EXPECT_EQ(r.size(), 1u);
  EXPECT_TRUE(r.Covers(0x10, 0x20));
  EXPECT_FALSE(r.Covers(0x100000, 0x100800));
}

}  // namespace
}  // namespace mla_tail::internal

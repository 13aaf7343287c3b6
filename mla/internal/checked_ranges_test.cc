// The pointer checks' cache of reachable ranges (CPU only: no CUDA call).

#include "mla/internal/checked_ranges.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

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

// Random additions and queries against a model that knows each 16-byte unit's range: a query is
// covered when every unit it touches lies in a kept range, all of one reservation.
TEST(CheckedRangesTest, AgreesWithAModelOfEveryUnit) {
  constexpr int kUnits = 256;  // 16-byte units of a 4 KB address range starting at 0x10000
  auto address = [](int unit) { return uintptr_t{0x10000} + 16 * static_cast<uintptr_t>(unit); };
  std::mt19937 random(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
  for (int round = 0; round < 200; ++round) {
    CheckedRanges ranges;
    std::vector<CheckedRanges::Range> model;  // the kept ranges, in units
    int queries_covered = 0;
    for (int step = 0; step < 60; ++step) {
      // A range of 1-32 units; its reservation its own start, or a kept range's (mappings end to
      // end in one reservation) when it starts where that range ends.
      const int begin = pick(0, kUnits - 1), end = std::min(kUnits, begin + pick(1, 32));
      uintptr_t reservation = address(begin);
      for (const auto& kept : model) {
        if (kept.end == static_cast<uintptr_t>(begin) && pick(0, 2) != 0) {
          reservation = address(static_cast<int>(kept.reservation));
        }
      }
      const uintptr_t reservation_unit = (reservation - address(0)) / 16;
      model.erase(std::remove_if(model.begin(), model.end(),
                                 [&](const CheckedRanges::Range& c) {
                                   return c.begin < static_cast<uintptr_t>(end) &&
                                          static_cast<uintptr_t>(begin) < c.end;
                                 }),
                  model.end());
      model.push_back(
          {static_cast<uintptr_t>(begin), static_cast<uintptr_t>(end), reservation_unit});
      ranges.Add({address(begin), address(end), reservation});
      ASSERT_EQ(ranges.size(), model.size());
      for (int query = 0; query < 20; ++query) {
        const int q_begin = pick(0, kUnits - 1), q_end = std::min(kUnits, q_begin + pick(1, 48));
        // Byte offsets inside the first and last unit, so that partial units count.
        const uintptr_t from = address(q_begin) + pick(0, 15);
        const uintptr_t to = address(q_end) - pick(0, 15);
        if (to <= from) continue;
        bool covered = true;
        int64_t reservation_seen = -1;
        for (uintptr_t unit = (from - address(0)) / 16; unit <= (to - 1 - address(0)) / 16;
             ++unit) {
          const CheckedRanges::Range* in = nullptr;
          for (const auto& kept : model) {
            if (kept.begin <= unit && unit < kept.end) in = &kept;
          }
          if (in == nullptr || (reservation_seen >= 0 &&
                                static_cast<int64_t>(in->reservation) != reservation_seen)) {
            covered = false;
            break;
          }
          reservation_seen = static_cast<int64_t>(in->reservation);
        }
        queries_covered += covered;
        ASSERT_EQ(ranges.Covers(from, to), covered)
            << "round " << round << " step " << step << ": [" << from << ", " << to << ")";
      }
    }
    EXPECT_GT(queries_covered, 0) << "round " << round;
  }
}

// A range held already, added again (two buffers of one allocation, a full check), is no change:
// the stamp stays, so the sets remembered against it stay remembered.
TEST(CheckedRangesTest, ARangeHeldAlreadyChangesNothing) {
  CheckedRanges r;
  r.Add({0x1000, 0x2000, 0x1000});
  r.Add({0x3000, 0x4000, 0x3000});
  const uint64_t stamp = r.stamp();
  r.Add({0x1000, 0x2000, 0x1000});
  r.Add({0x3000, 0x4000, 0x3000});
  EXPECT_EQ(r.stamp(), stamp);
  EXPECT_EQ(r.size(), 2u);
  EXPECT_TRUE(r.Covers(0x1000, 0x2000));
  // The same addresses in another reservation are other memory: the old range is dropped.
  r.Add({0x1000, 0x2000, 0x0800});
  EXPECT_NE(r.stamp(), stamp);
  EXPECT_EQ(r.size(), 2u);
}

// Drop removes what overlaps a range (memory another device's check found there), but the same
// range where asked, and changes the stamp only when it removed one.
TEST(CheckedRangesTest, DropRemovesOverlapsAndStampsOnlyThen) {
  CheckedRanges r;
  r.Add({0x1000, 0x2000, 0x1000});
  r.Add({0x3000, 0x4000, 0x3000});
  const uint64_t stamp = r.stamp();
  r.Drop({0x2000, 0x3000, 0x2000}, false);  // between the two: nothing overlaps
  EXPECT_EQ(r.stamp(), stamp);
  EXPECT_EQ(r.size(), 2u);
  r.Drop({0x1000, 0x2000, 0x1000}, true);  // the same range, kept where asked (shared memory)
  EXPECT_EQ(r.stamp(), stamp);
  EXPECT_EQ(r.size(), 2u);
  r.Drop({0x1000, 0x2000, 0x1000}, false);  // the same range, dropped (another device's memory)
  EXPECT_NE(r.stamp(), stamp);
  EXPECT_EQ(r.size(), 1u);
  const uint64_t second = r.stamp();
  r.Drop({0x2800, 0x3800, 0x2800}, true);  // overlaps the other: dropped either way
  EXPECT_NE(r.stamp(), second);
  EXPECT_EQ(r.size(), 0u);
  EXPECT_FALSE(r.Covers(0x3000, 0x3100));
}

TEST(CheckedRangesTest, StampChangesExactlyWhenARangeIsDropped) {
  CheckedRanges r;
  const uint64_t first = r.stamp();
  r.Add({0x1000, 0x2000, 0x1000});
  r.Add({0x3000, 0x4000, 0x3000});
  EXPECT_EQ(r.stamp(), first);      // added, nothing dropped: every accepted span still accepted
  r.Add({0x1800, 0x2800, 0x1800});  // memory at 0x1000 freed and mapped anew
  EXPECT_NE(r.stamp(), first);
  EXPECT_FALSE(r.Covers(0x1000, 0x1800));
  const uint64_t second = r.stamp();
  r.Clear();
  EXPECT_NE(r.stamp(), second);
  const uint64_t third = r.stamp();
  for (uintptr_t i = 0; i < CheckedRanges::kMaxRanges; ++i) {
    r.Add({0x100000 + 0x100 * i, 0x100000 + 0x100 * i + 0x80, 0x100000 + 0x100 * i});
  }
  EXPECT_EQ(r.stamp(), third);
  r.Add({0x10, 0x20, 0x10});  // full: the set starts again empty
  EXPECT_NE(r.stamp(), third);
  EXPECT_EQ(r.size(), 1u);
}

}  // namespace
}  // namespace mla_tail::internal

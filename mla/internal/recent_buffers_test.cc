#include "mla/internal/recent_buffers.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace mla_tail::internal {
namespace {

TailBuffers Buffers(uintptr_t latent) {
  TailBuffers b;
  b.latent = reinterpret_cast<const bf16*>(latent);
  b.latent_row_stride = 512;
  return b;
}

TEST(SameBuffersTest, EveryFieldCounts) {
  const TailBuffers a = Buffers(0x1000);
  EXPECT_TRUE(SameBuffers(a, a));
  TailBuffers b = a;
  b.row_count_before_upstream = true;
  EXPECT_FALSE(SameBuffers(a, b));
  b = a;
  b.rows_past_count_readable = true;
  EXPECT_FALSE(SameBuffers(a, b));
  b = a;
  b.output_scale_head_stride = 2;
  EXPECT_FALSE(SameBuffers(a, b));
  b = a;
  b.w_row_stride = 520;
  EXPECT_FALSE(SameBuffers(a, b));
}

TEST(RecentBuffersTest, HoldsTheLastTwoSets) {
  RecentBufferSets sets;
  int count = 0;
  const TailBuffers a = Buffers(0x1000), b = Buffers(0x2000), c = Buffers(0x3000);
  EXPECT_FALSE(IsRecent(sets, count, a));
  MakeRecent(sets, count, a);
  EXPECT_EQ(count, 1);
  EXPECT_TRUE(IsRecent(sets, count, a));
  EXPECT_FALSE(IsRecent(sets, count, b));
  MakeRecent(sets, count, b);
  EXPECT_EQ(count, 2);
  EXPECT_TRUE(IsRecent(sets, count, a));
  EXPECT_TRUE(IsRecent(sets, count, b));
  // Alternating between two sets keeps both.
  MakeRecent(sets, count, a);
  MakeRecent(sets, count, b);
  EXPECT_EQ(count, 2);
  EXPECT_TRUE(IsRecent(sets, count, a));
  EXPECT_TRUE(IsRecent(sets, count, b));
  // A third set drops the least recent.
  MakeRecent(sets, count, c);
  EXPECT_TRUE(IsRecent(sets, count, c));
  EXPECT_TRUE(IsRecent(sets, count, b));
  EXPECT_FALSE(IsRecent(sets, count, a));
}

TEST(RecentBuffersTest, ASetPassedAgainMovesToTheFront) {
  RecentBufferSets sets;
  int count = 0;
  const TailBuffers a = Buffers(0x1000), b = Buffers(0x2000), c = Buffers(0x3000);
  MakeRecent(sets, count, a);
  MakeRecent(sets, count, b);
  MakeRecent(sets, count, a);  // a most recent, b second
  MakeRecent(sets, count, c);  // drops b
  EXPECT_TRUE(IsRecent(sets, count, a));
  EXPECT_TRUE(IsRecent(sets, count, c));
  EXPECT_FALSE(IsRecent(sets, count, b));
}

}  // namespace
}  // namespace mla_tail::internal

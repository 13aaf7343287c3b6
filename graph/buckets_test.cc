#include "mla_tail/graph/buckets.h"

#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DefaultBucketsTest, FollowsThePeersLists) {
  const std::vector<int> b = DefaultBuckets(1);
  EXPECT_THAT(std::vector<int>(b.begin(), b.begin() + 6), ElementsAre(1, 2, 4, 8, 16, 24));
  EXPECT_EQ(b.back(), 512);
  EXPECT_TRUE(ValidateBuckets(b, 1).ok());
  EXPECT_EQ(b.size(), 3u + 32u + 16u);
}

TEST(DefaultBucketsTest, AreMultiplesOfQ) {
  for (int q : {1, 2, 3, 4, 8}) {
    const std::vector<int> b = DefaultBuckets(q);
    EXPECT_TRUE(ValidateBuckets(b, q).ok()) << q;
    EXPECT_EQ(b.front(), q);
  }
  EXPECT_THAT(DefaultBuckets(4, 16), ElementsAre(4, 8, 16));
  EXPECT_THAT(DefaultBuckets(3, 10), ElementsAre(3, 6, 9));
  EXPECT_THAT(DefaultBuckets(1, 1000).back(), 992);
}

TEST(DefaultBucketsTest, EmptyForQOutsideItsRange) {
  EXPECT_TRUE(DefaultBuckets(0).empty());
  EXPECT_TRUE(DefaultBuckets(-3).empty());
  EXPECT_TRUE(DefaultBuckets(65).empty());
  EXPECT_TRUE(DefaultBuckets(std::numeric_limits<int>::max(), 512).empty());
}

// A max_rows above the rows of one call stops at kMaxRows (no bucket could be used past it).
TEST(DefaultBucketsTest, StopAtTheRowsOfOneCall) {
  for (int q : {1, 3, 64}) {
    const std::vector<int> b = DefaultBuckets(q, std::numeric_limits<int>::max());
    EXPECT_TRUE(ValidateBuckets(b, q).ok()) << q;
    EXPECT_LE(b.back(), kMaxRows);
    EXPECT_GT(b.back(), kMaxRows - 32 * q);
  }
}

TEST(ValidateBucketsTest, NamesTheFault) {
  struct Case {
    std::vector<int> buckets;
    int q;
    const char* message;
  } cases[] = {
      {{}, 1, "empty"},
      {{1, 2, 2}, 1, "strictly increasing: bucket 2 = 2 follows 2"},
      {{4, 2}, 1, "bucket 1 = 2 follows 4"},
      {{2, 3}, 2, "bucket 1 = 3 is not a multiple of q = 2"},
      {{0, 8}, 1, "bucket 0 = 0 is outside"},
      {{8, 70000}, 1, "bucket 1 = 70000 is outside"},
      {{8}, 0, "q = 0"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ValidateBuckets(c.buckets, c.q);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(FindBucketTest, PicksTheSmallestBucketThatHoldsTheRows) {
  const std::vector<int> b = {1, 2, 4, 8, 16};
  EXPECT_EQ(*FindBucket(b, 1), 0);
  EXPECT_EQ(*FindBucket(b, 3), 2);
  EXPECT_EQ(*FindBucket(b, 8), 3);
  EXPECT_EQ(*FindBucket(b, 9), 4);
  EXPECT_EQ(*FindBucket(b, 16), 4);
  const absl::StatusOr<int> beyond = FindBucket(b, 17);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(beyond.status().message()), HasSubstr("rows = 17"));
}

}  // namespace
}  // namespace mla_tail

#include "mla/internal/recent_buffers.h"

#include <cstdint>
#include <iterator>

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
  // One change of each field, in the order TailBuffers declares them.
  void (*const changes[])(TailBuffers&) = {
      [](TailBuffers& b) { b.latent += 8; },
      [](TailBuffers& b) { b.latent_row_stride += 8; },
      [](TailBuffers& b) { b.w_uv = reinterpret_cast<const bf16*>(0x4000); },
      [](TailBuffers& b) { b.w_uv_fp8 = reinterpret_cast<const fp8_e4m3*>(0x4000); },
      [](TailBuffers& b) { b.w_head_stride = 65536; },
      [](TailBuffers& b) { b.w_row_stride = 520; },
      [](TailBuffers& b) { b.w_uv_scale = reinterpret_cast<const float*>(0x5000); },
      [](TailBuffers& b) { b.w_uv_scale_head_stride = 8; },
      [](TailBuffers& b) { b.gate = reinterpret_cast<const bf16*>(0x6000); },
      [](TailBuffers& b) { b.gate_row_stride = 128; },
      [](TailBuffers& b) { b.lengths = reinterpret_cast<const int32_t*>(0x7000); },
      [](TailBuffers& b) { b.output = reinterpret_cast<bf16*>(0x8000); },
      [](TailBuffers& b) { b.output_fp8 = reinterpret_cast<fp8_e4m3*>(0x8000); },
      [](TailBuffers& b) { b.output_row_stride = 128; },
      [](TailBuffers& b) { b.output_scale = reinterpret_cast<float*>(0x9000); },
      [](TailBuffers& b) { b.output_scale_row_stride = 1; },
      [](TailBuffers& b) { b.output_scale_head_stride = 2; },
      [](TailBuffers& b) { b.row_count = reinterpret_cast<const int32_t*>(0xa000); },
      [](TailBuffers& b) { b.row_count_before_upstream = true; },
      [](TailBuffers& b) { b.rows_past_count_readable = true; },
  };
  static_assert(std::size(changes) == kTailBuffersFields, "one change a field");
  static_assert(FieldCount<TailBuffers>() == kTailBuffersFields);
  for (size_t i = 0; i < std::size(changes); ++i) {
    TailBuffers b = a;
    changes[i](b);
    EXPECT_FALSE(SameBuffers(a, b)) << "field " << i;
    EXPECT_FALSE(SameBuffers(b, a)) << "field " << i;
  }
}

TEST(FieldCountTest, CountsAnAggregatesFields) {
  struct Three {
    int a = 0;
    const int* b = nullptr;
    bool c = false;
  };
  struct One {
    double x;
  };
  EXPECT_EQ(FieldCount<Three>(), 3u);
  EXPECT_EQ(FieldCount<One>(), 1u);
}

// A holder's three fields, as a TailNode or a graph-set layer keeps them.
struct Holder {
  RecentBufferSets sets{};
  int count = 0;
  uint64_t stamp = 0;
  RecentSets recent() { return {sets, count, stamp}; }
};

TEST(RecentBuffersTest, HoldsTheLastTwoSets) {
  Holder h;
  const uint64_t s = 7;
  const TailBuffers a = Buffers(0x1000), b = Buffers(0x2000), c = Buffers(0x3000);
  EXPECT_FALSE(IsRecent(h.recent(), a, s));
  MakeRecent(h.recent(), a, s);
  EXPECT_EQ(h.count, 1);
  EXPECT_TRUE(IsRecent(h.recent(), a, s));
  EXPECT_FALSE(IsRecent(h.recent(), b, s));
  MakeRecent(h.recent(), b, s);
  EXPECT_EQ(h.count, 2);
  EXPECT_TRUE(IsRecent(h.recent(), a, s));
  EXPECT_TRUE(IsRecent(h.recent(), b, s));
  // Alternating between two sets keeps both.
  MakeRecent(h.recent(), a, s);
  MakeRecent(h.recent(), b, s);
  EXPECT_EQ(h.count, 2);
  EXPECT_TRUE(IsRecent(h.recent(), a, s));
  EXPECT_TRUE(IsRecent(h.recent(), b, s));
  // A third set drops the least recent.
  MakeRecent(h.recent(), c, s);
  EXPECT_TRUE(IsRecent(h.recent(), c, s));
  EXPECT_TRUE(IsRecent(h.recent(), b, s));
  EXPECT_FALSE(IsRecent(h.recent(), a, s));
}

TEST(RecentBuffersTest, ASetPassedAgainMovesToTheFront) {
  Holder h;
  const uint64_t s = 7;
  const TailBuffers a = Buffers(0x1000), b = Buffers(0x2000), c = Buffers(0x3000);
  MakeRecent(h.recent(), a, s);
  MakeRecent(h.recent(), b, s);
  MakeRecent(h.recent(), a, s);  // a most recent, b second
  MakeRecent(h.recent(), c, s);  // drops b
  EXPECT_TRUE(IsRecent(h.recent(), a, s));
  EXPECT_TRUE(IsRecent(h.recent(), c, s));
  EXPECT_FALSE(IsRecent(h.recent(), b, s));
}

TEST(RecentBuffersTest, NoSetIsHeldOnceThePointerCacheForgetsARange) {
  Holder h;
  const TailBuffers a = Buffers(0x1000), b = Buffers(0x2000);
  MakeRecent(h.recent(), a, 7);
  MakeRecent(h.recent(), b, 7);
  // The cache dropped a range since: either set's checks may rest on it.
  EXPECT_FALSE(IsRecent(h.recent(), a, 8));
  EXPECT_FALSE(IsRecent(h.recent(), b, 8));
  // A set checked under the new stamp replaces both.
  MakeRecent(h.recent(), b, 8);
  EXPECT_EQ(h.count, 1);
  EXPECT_TRUE(IsRecent(h.recent(), b, 8));
  EXPECT_FALSE(IsRecent(h.recent(), a, 8));
}

TEST(RecentBuffersTest, NothingIsHeldForADeviceWhoseChecksAreNotCached) {
  Holder h;
  const TailBuffers a = Buffers(0x1000);
  MakeRecent(h.recent(), a, 0);
  EXPECT_FALSE(IsRecent(h.recent(), a, 0));
}

}  // namespace
}  // namespace mla_tail::internal

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

#include "mla_tail/mla/tail_args.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/internal/tail_extents.h"

namespace mla_tail {
namespace {

using ::testing::HasSubstr;

// Host buffers stand in for device memory: validation only looks at addresses.
struct Fixture {
  explicit Fixture(TailShape s) : shape(s) {
    latent.resize(size_t(s.rows) * s.heads * kLatentDim + 8);
    w_uv.resize(size_t(s.heads) * kValueDim * kLatentDim + 8);
    gate.resize(size_t(s.rows) * s.heads * kValueDim + 8);
    output.resize(size_t(s.rows) * s.heads * kValueDim + 8);
    lengths.resize(s.rows / s.q + 1);
    buffers = CompactBuffers(s, Aligned(latent), Aligned(w_uv), Aligned(gate), lengths.data(),
                             Aligned(output));
  }
  static bf16* Aligned(std::vector<bf16>& v) {
    auto address = reinterpret_cast<uintptr_t>(v.data());
    return reinterpret_cast<bf16*>((address + 15) & ~uintptr_t{15});
  }
  TailShape shape;
  std::vector<bf16> latent, w_uv, gate, output;
  std::vector<int32_t> lengths;
  TailBuffers buffers;
};

TEST(ValidateShapeTest, AcceptsTheContractsRange) {
  for (int heads : {1, 3, 12, 63, 128}) {
    for (int q : {1, 2, 4, 8}) {
      EXPECT_TRUE(ValidateShape({heads, 16 * q, q}).ok()) << heads << " " << q;
    }
  }
  EXPECT_TRUE(ValidateShape({128, kMaxRows, 1}).ok());
}

TEST(ValidateShapeTest, NamesTheArgumentAndValue) {
  struct Case {
    TailShape shape;
    const char* message;
  } cases[] = {
      {{0, 16, 1}, "heads = 0"},
      {{129, 16, 1}, "heads = 129"},
      {{-1, 16, 1}, "heads = -1"},
      {{8, 0, 1}, "rows = 0"},
      {{8, -4, 1}, "rows = -4"},
      {{8, kMaxRows + 1, 1}, "rows = 65537"},
      {{8, 16, 0}, "q = 0"},
      {{8, 16, -2}, "q = -2"},
      {{8, 15, 2}, "rows = 15 is not a multiple of q = 2"},
      {{8, 128, kMaxQ + 1}, "q = 65"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateShape(c.shape);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(ValidateTailTest, AcceptsCompactAndStridedBuffers) {
  Fixture f({12, 32, 2});
  EXPECT_TRUE(ValidateTail(f.shape, f.buffers).ok());
  // W_UV as the V half of a [H, 256, 512] kv_b_proj: the head stride is 256 * 512.
  std::vector<bf16> kv_b_proj(size_t(12) * 256 * 512 + 8);
  f.buffers.w_uv = Fixture::Aligned(kv_b_proj) + 128 * 512;
  f.buffers.w_head_stride = 256 * 512;
  EXPECT_TRUE(ValidateTail(f.shape, f.buffers).ok());
}

TEST(ValidateTailTest, RefusesNullPointers) {
  Fixture f({4, 16, 1});
  const std::pair<const char*, void (*)(TailBuffers&)> cases[] = {
      {"latent is null", [](TailBuffers& b) { b.latent = nullptr; }},
      {"w_uv is null", [](TailBuffers& b) { b.w_uv = nullptr; }},
      {"lengths is null", [](TailBuffers& b) { b.lengths = nullptr; }},
      {"output is null", [](TailBuffers& b) { b.output = nullptr; }},
  };
  for (const auto& [message, mutate] : cases) {
    TailBuffers b = f.buffers;
    mutate(b);
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
  }
}

TEST(ValidateTailTest, RefusesMisalignedPointers) {
  Fixture f({4, 16, 1});
  const std::pair<const char*, void (*)(TailBuffers&)> cases[] = {
      {"latent = ", [](TailBuffers& b) { b.latent += 1; }},
      {"w_uv = ", [](TailBuffers& b) { b.w_uv += 4; }},
      {"gate = ", [](TailBuffers& b) { b.gate += 2; }},
      {"output = ", [](TailBuffers& b) { b.output += 7; }},
      {"lengths = ",
       [](TailBuffers& b) {
         b.lengths = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(b.lengths) + 2);
       }},
  };
  for (const auto& [message, mutate] : cases) {
    TailBuffers b = f.buffers;
    mutate(b);
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
    EXPECT_THAT(std::string(status.message()), HasSubstr("aligned"));
  }
}

TEST(ValidateTailTest, RefusesSmallOrMisalignedStrides) {
  Fixture f({4, 16, 1});
  const std::pair<const char*, void (*)(TailBuffers&)> cases[] = {
      {"latent_row_stride = 2040 is below heads * 512 = 2048",
       [](TailBuffers& b) { b.latent_row_stride = 2040; }},
      {"latent_row_stride = 2052 is not a multiple of 8",
       [](TailBuffers& b) { b.latent_row_stride = 2052; }},
      {"w_row_stride = 256 is below 512", [](TailBuffers& b) { b.w_row_stride = 256; }},
      {"w_row_stride = 516 is not a multiple of 8", [](TailBuffers& b) { b.w_row_stride = 516; }},
      {"w_head_stride = 512 is below 128 * w_row_stride = 65536",
       [](TailBuffers& b) { b.w_head_stride = 512; }},
      // The minimum follows padded W_UV rows (128 of them a head).
      {"w_head_stride = 65536 is below 128 * w_row_stride = 81920",
       [](TailBuffers& b) {
         b.w_row_stride = 640;
         b.w_head_stride = 65536;
       }},
      {"gate_row_stride = 256 is below heads * 128 = 512",
       [](TailBuffers& b) { b.gate_row_stride = 256; }},
      {"gate_row_stride = 513", [](TailBuffers& b) { b.gate_row_stride = 513; }},
      {"output_row_stride = 0 is below", [](TailBuffers& b) { b.output_row_stride = 0; }},
      {"output_row_stride = 516 is not a multiple of 8",
       [](TailBuffers& b) { b.output_row_stride = 516; }},
  };
  for (const auto& [message, mutate] : cases) {
    TailBuffers b = f.buffers;
    mutate(b);
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
  }
}

// Strides past 2^40 elements are refused by name before any product is formed: at 2^62 the
// bytes rows x stride span would overflow int64 (UBSan: tools/ubsan.sh).
TEST(ValidateTailTest, RefusesStridesAboveTheirBound) {
  Fixture f({4, 16, 1});
  const std::pair<const char*, void (*)(TailBuffers&)> cases[] = {
      {"output_row_stride = 4611686018427387904 is above kMaxStride",
       [](TailBuffers& b) { b.output_row_stride = int64_t{1} << 62; }},
      {"latent_row_stride = 9223372036854775800 is above kMaxStride",
       [](TailBuffers& b) { b.latent_row_stride = INT64_MAX - 7; }},
      {"gate_row_stride = 1099511627784 is above kMaxStride",
       [](TailBuffers& b) { b.gate_row_stride = kMaxStride + 8; }},
      {"w_row_stride = 4611686018427387904 is above kMaxStride",
       [](TailBuffers& b) { b.w_row_stride = int64_t{1} << 62; }},
      {"w_head_stride = 4611686018427387904 is above kMaxStride",
       [](TailBuffers& b) { b.w_head_stride = int64_t{1} << 62; }},
  };
  for (const auto& [message, mutate] : cases) {
    TailBuffers b = f.buffers;
    mutate(b);
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
  }
  // One head never applies its head stride, but it is bounded all the same.
  Fixture one({1, 16, 1});
  one.buffers.w_head_stride = int64_t{1} << 62;
  EXPECT_THAT(std::string(ValidateTail(one.shape, one.buffers).message()),
              HasSubstr("w_head_stride = 4611686018427387904 is above kMaxStride"));
}

// At the bound, 65536 rows of the largest strides span 2^57 bytes each: no overflow. Validation
// looks at addresses only, so the buffers here are addresses 2^58 apart, never dereferenced.
TEST(ValidateTailTest, LargestStridesStayInRange) {
  const TailShape shape{128, kMaxRows, 1};
  const auto at = [](uintptr_t n) { return reinterpret_cast<bf16*>(n << 58); };
  TailBuffers b =
      CompactBuffers(shape, at(1), at(2), at(3), reinterpret_cast<const int32_t*>(at(4)), at(5));
  b.latent_row_stride = kMaxStride;
  b.w_row_stride = kMaxStride / 128;
  b.w_head_stride = kMaxStride;
  b.gate_row_stride = kMaxStride;
  b.output_row_stride = kMaxStride;
  EXPECT_TRUE(ValidateTail(shape, b).ok()) << ValidateTail(shape, b);
  // A span that would run past the top of the address space is refused.
  b.output = reinterpret_cast<bf16*>(~uintptr_t{0} - 4095);
  EXPECT_THAT(std::string(ValidateTail(shape, b).message()),
              HasSubstr("output = 0xfffffffffffff000: the bytes it spans run past the end"));
}

// The gate and the row count are optional: without a gate its stride is not looked at; a row
// count is aligned and no output byte.
TEST(ValidateTailTest, TheGateAndTheRowCountAreOptional) {
  Fixture f({4, 16, 1});
  TailBuffers b = f.buffers;
  b.gate = nullptr;
  b.gate_row_stride = 3;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  int32_t count[2] = {};
  b.row_count = &count[0];
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  b.row_count = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(count) + 1);
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("is not 4-byte aligned"));
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("row_count = "));
  b.row_count = reinterpret_cast<const int32_t*>(b.output) + 100;
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()),
              HasSubstr("output overlaps row_count"));
}

// Each flag about the count (read early; rows past it readable) needs a count.
TEST(ValidateTailTest, TheCountsFlagsNeedACount) {
  for (const auto& [flag, name] :
       {std::pair{&TailBuffers::row_count_before_upstream, "row_count_before_upstream"},
        std::pair{&TailBuffers::rows_past_count_readable, "rows_past_count_readable"}}) {
    SCOPED_TRACE(name);
    Fixture f({4, 16, 1});
    TailBuffers b = f.buffers;
    b.*flag = true;
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(std::string(name) + " is set without row_count"));
    int32_t count = 0;
    b.row_count = &count;
    EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  }
}

// Strides of absent tensors are not validated, so nothing may compute with them: under UBSan an
// extreme value would overflow there.
TEST(ValidateTailTest, StridesOfAbsentTensorsAreNeverUsed) {
  Fixture f({4, 16, 1});
  TailBuffers b = f.buffers;
  b.gate = nullptr;
  b.gate_row_stride = std::numeric_limits<int64_t>::max();
  b.output_scale_row_stride = std::numeric_limits<int64_t>::max();
  b.output_scale_head_stride = std::numeric_limits<int64_t>::min();
  b.w_uv_scale_head_stride = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
}

// No user address lies above 2^63 - 1: a span ending there is refused before the overlap rule's
// signed arithmetic sees it, and so is one that wraps past the top of the address space.
TEST(ValidateTailTest, SpansEndingAboveTheSignedRangeAreRefused) {
  Fixture f({1, 1, 1});
  for (const uintptr_t address :
       {uintptr_t{0x7FFFFFFFFFFFFF00}, uintptr_t{0x8000000000000000}, ~uintptr_t{0xFF}}) {
    TailBuffers b = f.buffers;
    b.output = reinterpret_cast<bf16*>(address);
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("past the end of the address space"));
  }
}

TEST(ValidateTailTest, OneHeadMayUseAnyHeadStride) {
  Fixture f({1, 16, 1});
  f.buffers.w_head_stride = 0;
  EXPECT_TRUE(ValidateTail(f.shape, f.buffers).ok());
}

TEST(ValidateTailTest, RefusesAnOutputThatOverlapsAnInput) {
  Fixture f({4, 16, 1});
  TailBuffers b = f.buffers;
  b.output = const_cast<bf16*>(b.gate);
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps gate"));
  b = f.buffers;
  b.output = const_cast<bf16*>(b.latent) + 64;
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps latent"));
  b = f.buffers;
  b.output = const_cast<bf16*>(b.w_uv) + 3 * 128 * 512 + 8;  // inside head 3
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()),
              HasSubstr("output overlaps w_uv (head 3)"));
  b = f.buffers;
  b.lengths = reinterpret_cast<const int32_t*>(b.output + 16 * 512 - 2);  // the last element
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()),
              HasSubstr("output overlaps lengths"));
  // With q = 2 the lengths are rows / q = 8 words (32 bytes): an output 32 bytes past them is
  // clear of them, one 16 bytes past them is not.
  // The lengths and the output (16 rows of 512 bf16) in one arena of their own.
  Fixture two({4, 16, 2});
  std::vector<int32_t> words(8 + 16 * 512 / 2 + 8);
  int32_t* const aligned =
      reinterpret_cast<int32_t*>((reinterpret_cast<uintptr_t>(words.data()) + 15) & ~uintptr_t{15});
  b = two.buffers;
  b.lengths = aligned;
  b.output = reinterpret_cast<bf16*>(aligned + 8);
  const absl::Status clear = ValidateTail(two.shape, b);
  EXPECT_TRUE(clear.ok()) << clear;
  b.output = reinterpret_cast<bf16*>(aligned + 4);
  EXPECT_THAT(std::string(ValidateTail(two.shape, b).message()),
              HasSubstr("output overlaps lengths"));
}

// The bytes each tensor touches are compared, row by row: a gate sliced from a wider row may
// share its rows with the output as long as no byte is both.
TEST(ValidateTailTest, GateAndOutputMayInterleaveInOneRow) {
  Fixture f({4, 16, 1});  // 512 elements a row
  std::vector<bf16> wide(size_t(16) * 1024 + 16);
  TailBuffers b = f.buffers;
  b.gate = Fixture::Aligned(wide);
  b.gate_row_stride = 1024;
  b.output = Fixture::Aligned(wide) + 512;
  b.output_row_stride = 1024;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  // The output first in each row, the gate second.
  b.output = Fixture::Aligned(wide);
  b.gate = Fixture::Aligned(wide) + 512;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  // Shifted by 8 elements, each output row's last 8 elements are the next gate row's first.
  b.output = Fixture::Aligned(wide) + 520;
  b.gate = Fixture::Aligned(wide);
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps gate"));
  // ... and 8 elements the other way, each output row's first 8 are its gate row's last.
  b.output = Fixture::Aligned(wide) + 504;
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps gate"));
}

TEST(ValidateTailTest, OverlapsOfRowsAtDifferentStrides) {
  Fixture f({4, 16, 1});  // output and gate rows of 512 elements
  std::vector<bf16> wide(size_t(16) * 2048 + 16);
  bf16* base = Fixture::Aligned(wide);
  TailBuffers b = f.buffers;
  // The gate's rows 1024 apart, the output's 1536 apart from 512: output row 1 (at 2048) is gate
  // row 2.
  b.gate = base;
  b.gate_row_stride = 1024;
  b.output = base + 512;
  b.output_row_stride = 1536;
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps gate"));
  // Rows 2048 apart against 1024 apart, offset by 512: the output sits in the gate's gaps.
  b.output_row_stride = 2048;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
}

TEST(ValidateTailTest, OutputInTheGapsOfW_UV) {
  // W_UV as the V half of kv_b_proj: each head's K half (128 rows) is never read, and an output
  // there overlaps nothing; W_UV rows padded beyond 512 leave gaps too.
  Fixture f({1, 16, 1});  // output: 16 rows of 128 elements
  std::vector<bf16> kv_b_proj(size_t(2) * 256 * 512 + 16);
  bf16* base = Fixture::Aligned(kv_b_proj);
  TailBuffers b = f.buffers;
  b.w_uv = base + 128 * 512;
  b.output = base;  // the K half of head 0
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  b.output = base + 127 * 512 + 8;  // its last 8 elements meet W_UV's first
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps w_uv"));
  // Rows of 640 elements: 128 elements after each row of 512 are not read.
  std::vector<bf16> padded(size_t(128) * 640 + 16);
  b = f.buffers;
  b.w_uv = Fixture::Aligned(padded);
  b.w_row_stride = 640;
  b.output = Fixture::Aligned(padded) + 512;
  b.output_row_stride = 640;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  b.output_row_stride = 648;  // drifts into W_UV's rows
  EXPECT_THAT(std::string(ValidateTail(f.shape, b).message()), HasSubstr("output overlaps w_uv"));
}

// Random layouts in one arena, their verdict against a byte map: every byte an input is read from
// marked, then each output byte looked up. The scales of an e4m3 output count as spans, from each
// row's first entry to its last (row-major, one row always) or each head's (head-major), as the
// contract says.
// The outputs are placed at random, near another tensor, or where a row of theirs ends one byte
// before or exactly at another's row (the edges an off-by-one would get wrong).
TEST(ValidateTailTest, OverlapVerdictsAndExtentsMatchAByteMap) {
  constexpr int64_t kArena = int64_t{3} << 19;  // 1.5 MB: three heads of W_UV at stride 1024
  std::vector<char> storage(kArena + 16);
  char* const arena =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(storage.data()) + 15) & ~uintptr_t{15});
  std::vector<uint8_t> map(kArena);
  std::mt19937_64 random(20261204);
  auto pick = [&](int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return std::uniform_int_distribution<int64_t>(lo, hi)(random);
  };
  // `count` rows of `width` bytes, `stride` bytes apart, relative to the tensor's place.
  struct Rows {
    int64_t count, stride, width;
    int64_t bytes() const { return (count - 1) * stride + width; }
  };
  enum { kLatent, kW, kGate, kLengths, kRowCount, kOutput, kWScale, kOutputScale, kTensors };
  int overlapping = 0, disjoint = 0;
  for (int trial = 0; trial < 6000; ++trial) {
    // q a divisor of the rows (1, or 2 or 3 where they divide them): the lengths are rows / q.
    const int rows_picked = static_cast<int>(pick(1, 6));
    const int q_picked = static_cast<int>(pick(1, 3));
    const TailShape shape{static_cast<int>(pick(1, 3)), rows_picked,
                          rows_picked % q_picked == 0 ? q_picked : 1};
    const int64_t heads = shape.heads, rows = shape.rows, width = heads * kValueDim;
    const bool fp8_weight = pick(0, 2) == 0, fp8_output = pick(0, 2) == 0;
    const bool gated = pick(0, 3) != 0, counted = pick(0, 1) == 1;
    const int64_t wb = fp8_weight ? 1 : 2, ob = fp8_output ? 1 : 2;
    // Strides at or a little above their minimum, or a multiple of it (interleaved rows).
    auto stride = [&](int64_t minimum, int64_t element_bytes) {
      return pick(0, 1) == 0 ? minimum + 16 / element_bytes * pick(0, 4) : minimum * pick(2, 3);
    };
    const int64_t latent_stride = stride(heads * kLatentDim, 2);
    const int64_t gate_stride = stride(width, 2);
    const int64_t out_stride = pick(0, 2) == 0 && ob == 2 ? gate_stride : stride(width, ob);
    const int64_t w_row = pick(0, 1) == 0 ? kLatentDim : kLatentDim + 16 * pick(1, 32);
    const int64_t w_head = heads > 1 ? kValueDim * w_row * pick(1, 2) : 0;
    const int64_t w_scale_head = 4 * pick(1, 2);
    // The output's scales row-major or head-major, their inner stride 1 or 2; a stride that is
    // never applied (one row, one head) counts as 0.
    const bool row_major = pick(0, 1) == 0;
    const int64_t inner = pick(1, 2);
    const int64_t scale_row = row_major ? heads * inner + pick(0, 3) : inner;
    const int64_t scale_head = row_major ? inner : rows * inner + pick(0, 3);
    const int64_t row_step = rows > 1 ? scale_row : 0, head_step = heads > 1 ? scale_head : 0;
    const bool by_rows = rows == 1 || row_step >= heads * head_step;

    // Each tensor's rows (W_UV's per head, `w_head * wb` bytes apart), and its alignment.
    const Rows layout[kTensors] = {
        {rows, latent_stride * 2, heads * kLatentDim * 2},
        {kValueDim, w_row * wb, kLatentDim * wb},
        {rows, gate_stride * 2, width * 2},
        {1, 0, 4 * rows / shape.q},
        {1, 0, 4},
        {rows, out_stride * ob, width * ob},
        {heads, w_scale_head * 4, 16},
        by_rows ? Rows{rows, row_step * 4, ((heads - 1) * head_step + 1) * 4}
                : Rows{heads, head_step * 4, ((rows - 1) * row_step + 1) * 4}};
    const int64_t align[kTensors] = {16, 16, 16, 4, 4, 16, 16, 4};
    auto bytes = [&](int i) {
      return layout[i].bytes() + (i == kW ? (heads - 1) * w_head * wb : 0);
    };
    int64_t at[kTensors];
    for (int i = 0; i < kTensors; ++i) at[i] = align[i] * pick(0, (kArena - bytes(i)) / align[i]);
    for (int output : {kOutput, kOutputScale}) {
      const int near = static_cast<int>(pick(0, kTensors - 1));
      const int64_t mode = pick(0, 3);
      if (near == output || mode == 0) continue;
      const Rows& n = layout[near];
      const int64_t row = at[near] + pick(0, n.count - 1) * n.stride +
                          (near == kW ? pick(0, heads - 1) * w_head * wb : 0);
      int64_t candidate =
          mode == 1 ? at[near] + 16 * pick(-64, 256)
          : mode == 2
              ? row + n.width - align[output] * pick(0, 1)  // begins at or before a row's end
              : row - layout[output].width +
                    align[output] * pick(0, 1);  // ends at or after a start
      candidate -= candidate % align[output];
      if (candidate >= 0 && candidate + bytes(output) <= kArena) at[output] = candidate;
    }

    TailBuffers b;
    b.latent = reinterpret_cast<const bf16*>(arena + at[kLatent]);
    b.latent_row_stride = latent_stride;
    if (fp8_weight) {
      b.w_uv_fp8 = reinterpret_cast<const fp8_e4m3*>(arena + at[kW]);
      b.w_uv_scale = reinterpret_cast<const float*>(arena + at[kWScale]);
      b.w_uv_scale_head_stride = w_scale_head;
    } else {
      b.w_uv = reinterpret_cast<const bf16*>(arena + at[kW]);
    }
    b.w_head_stride = w_head;
    b.w_row_stride = w_row;
    if (gated) {
      b.gate = reinterpret_cast<const bf16*>(arena + at[kGate]);
      b.gate_row_stride = gate_stride;
    }
    b.lengths = reinterpret_cast<const int32_t*>(arena + at[kLengths]);
    if (counted) b.row_count = reinterpret_cast<const int32_t*>(arena + at[kRowCount]);
    if (fp8_output) {
      b.output_fp8 = reinterpret_cast<fp8_e4m3*>(arena + at[kOutput]);
      b.output_scale = reinterpret_cast<float*>(arena + at[kOutputScale]);
      b.output_scale_row_stride = scale_row;
      b.output_scale_head_stride = scale_head;
    } else {
      b.output = reinterpret_cast<bf16*>(arena + at[kOutput]);
    }
    b.output_row_stride = out_stride;

    // The byte map: 1 where an input is read, 2 where the output is written.
    std::memset(map.data(), 0, map.size());
    auto for_rows = [&](int i, int64_t offset, auto f) {
      const Rows& r = layout[i];
      for (int64_t j = 0; j < r.count; ++j) {
        const int64_t begin = at[i] + offset + j * r.stride;
        f(begin, begin + r.width);
      }
    };
    auto mark = [&](uint8_t value) {
      return [&map, value](int64_t begin, int64_t end) {
        std::memset(map.data() + begin, value, static_cast<size_t>(end - begin));
      };
    };
    bool overlap = false;
    auto look_up = [&](uint8_t value) {
      return [&map, &overlap, value](int64_t begin, int64_t end) {
        for (int64_t x = begin; x < end; ++x) overlap |= map[x] == value;
      };
    };
    const bool present[kTensors] = {true, true, gated, true, counted, true, fp8_weight, fp8_output};
    for (int i : {kLatent, kGate, kLengths, kRowCount, kWScale}) {
      if (present[i]) for_rows(i, 0, mark(1));
    }
    for (int64_t h = 0; h < heads; ++h) for_rows(kW, h * w_head * wb, mark(1));
    for_rows(kOutput, 0, look_up(1));
    if (fp8_output) {
      for_rows(kOutputScale, 0, look_up(1));
      for_rows(kOutput, 0, mark(2));
      for_rows(kOutputScale, 0, look_up(2));
    }

    // What the pointer checks ask CUDA about: each present tensor's bytes from its first to its
    // last, exactly (short, a call could run past an allocation; long, refuse one that holds it).
    const internal::TailExtents extents = internal::ExtentsOf(shape, b);
    const std::pair<const internal::Extent*, int> spans[] = {
        {&extents.latent, kLatent},      {&extents.w_uv, kW},
        {&extents.gate, kGate},          {&extents.lengths, kLengths},
        {&extents.row_count, kRowCount}, {&extents.output, kOutput},
        {&extents.w_uv_scale, kWScale},  {&extents.output_scale, kOutputScale}};
    for (const auto& [extent, i] : spans) {
      if (!present[i]) {
        EXPECT_EQ(extent->begin, extent->end) << extent->name << " is absent: it spans nothing";
        continue;
      }
      int64_t first = kArena, last = 0;
      for (int64_t h = 0; h < (i == kW ? heads : 1); ++h) {
        for_rows(i, i == kW ? h * w_head * wb : 0, [&](int64_t begin, int64_t end) {
          first = std::min(first, begin);
          last = std::max(last, end);
        });
      }
      const auto base = reinterpret_cast<uintptr_t>(arena);
      EXPECT_EQ(extent->begin, base + first) << extent->name << ", trial " << trial;
      EXPECT_EQ(extent->end, base + last) << extent->name << ", trial " << trial;
    }

    const absl::Status status = ValidateTail(shape, b);
    const std::string description = absl::StrCat(
        "trial ", trial, ": heads ", heads, " rows ", rows, " q ", shape.q, " fp8 W ", fp8_weight,
        " fp8 out ", fp8_output, " gated ", gated, " strides latent ", latent_stride, " gate ",
        gate_stride, " out ", out_stride, " w ", w_row, "/", w_head, " scales ", scale_row, "/",
        scale_head, " at ", absl::StrJoin(at, ","), ": ", status.ToString());
    if (overlap) {
      ++overlapping;
      EXPECT_THAT(std::string(status.message()), HasSubstr("overlaps")) << description;
    } else {
      ++disjoint;
      EXPECT_TRUE(status.ok()) << description;
    }
  }
  // Both verdicts were exercised, many times each.
  EXPECT_GT(overlapping, 1000);
  EXPECT_GT(disjoint, 1000);
}

// FP8 tensors in host memory (validation only looks at addresses), carved from one arena with
// 64 KB between them so that only the overlaps a test makes exist: W_UV as e4m3 with its block
// scales, and an e4m3 output with its scales, beside the bf16 fixture's other tensors.
struct Fp8Fixture : Fixture {
  static constexpr size_t kGap = 64 << 10;
  explicit Fp8Fixture(TailShape s) : Fixture(s) {
    const size_t w_bytes = size_t(s.heads) * 256 * kLatentDim;
    const size_t out_bytes = size_t(s.rows) * s.heads * kValueDim;
    arena.resize(w_bytes + out_bytes + 4 * kGap);
    auto address = reinterpret_cast<uintptr_t>(arena.data());
    char* base = reinterpret_cast<char*>((address + 15) & ~uintptr_t{15});
    w8 = reinterpret_cast<fp8_e4m3*>(base);
    scales = reinterpret_cast<float*>(base + w_bytes + kGap);
    out8 = reinterpret_cast<fp8_e4m3*>(base + w_bytes + 2 * kGap);
    out_scales = reinterpret_cast<float*>(base + w_bytes + out_bytes + 3 * kGap);
    buffers.w_uv = nullptr;
    buffers.w_uv_fp8 = w8;
    buffers.w_uv_scale = scales;
    buffers.w_uv_scale_head_stride = 4;
    buffers.output = nullptr;
    buffers.output_fp8 = out8;
    buffers.output_scale = out_scales;
    buffers.output_scale_row_stride = s.heads;
  }
  std::vector<char> arena;
  fp8_e4m3* w8;
  float* scales;
  fp8_e4m3* out8;
  float* out_scales;
};

TEST(ValidateTailTest, AcceptsFp8WeightsAndOutputs) {
  Fp8Fixture f({12, 32, 2});
  EXPECT_TRUE(ValidateTail(f.shape, f.buffers).ok()) << ValidateTail(f.shape, f.buffers);
  EXPECT_EQ(WeightTypeOf(f.buffers), WeightType::kE4m3);
  EXPECT_EQ(OutputTypeOf(f.buffers), OutputType::kE4m3);
  // The checkpoint's kv_b_proj: e4m3 [H * 256, 512] and weight_scale_inv [H * 2, 4]; W_UV is the
  // V half (rows 128-255 of each head), its scales block row 2h + 1.
  TailBuffers b = f.buffers;
  b.w_uv_fp8 = f.w8 + 128 * 512;
  b.w_head_stride = 256 * 512;
  b.w_uv_scale = f.scales + 4;
  b.w_uv_scale_head_stride = 8;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  // Head-major output scales ([H, B]: row stride 1, head stride >= B), as block-scaled GEMMs read
  // them.
  b.output_scale_row_stride = 1;
  b.output_scale_head_stride = 36;
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  // Either half alone: FP8 weights with a bf16 output, bf16 weights with an FP8 output.
  b = f.buffers;
  b.output_fp8 = nullptr;
  b.output_scale = nullptr;
  b.output = Fixture::Aligned(f.output);
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  EXPECT_EQ(OutputTypeOf(b), OutputType::kBf16);
  b = f.buffers;
  b.w_uv_fp8 = nullptr;
  b.w_uv_scale = nullptr;
  b.w_uv = Fixture::Aligned(f.w_uv);
  EXPECT_TRUE(ValidateTail(f.shape, b).ok()) << ValidateTail(f.shape, b);
  EXPECT_EQ(WeightTypeOf(b), WeightType::kBf16);
  // One head: the scale head strides are never applied.
  Fp8Fixture one({1, 1, 1});
  one.buffers.w_uv_scale_head_stride = 0;
  one.buffers.output_scale_row_stride = 0;
  one.buffers.output_scale_head_stride = 0;
  EXPECT_TRUE(ValidateTail(one.shape, one.buffers).ok()) << ValidateTail(one.shape, one.buffers);
}

TEST(ValidateTailTest, RefusesBadFp8Buffers) {
  Fp8Fixture f({4, 16, 1});
  const std::pair<const char*, void (*)(TailBuffers&)> cases[] = {
      {"w_uv and w_uv_fp8 are both set",
       [](TailBuffers& b) { b.w_uv = reinterpret_cast<const bf16*>(b.w_uv_fp8); }},
      {"w_uv is null (and so is w_uv_fp8)", [](TailBuffers& b) { b.w_uv_fp8 = nullptr; }},
      {"output and output_fp8 are both set",
       [](TailBuffers& b) { b.output = reinterpret_cast<bf16*>(b.output_fp8); }},
      {"output is null (and so is output_fp8)", [](TailBuffers& b) { b.output_fp8 = nullptr; }},
      {"w_uv_fp8 = ", [](TailBuffers& b) { b.w_uv_fp8 += 8; }},
      {"output_fp8 = ", [](TailBuffers& b) { b.output_fp8 += 4; }},
      {"w_uv_scale is null", [](TailBuffers& b) { b.w_uv_scale = nullptr; }},
      {"w_uv_scale = ", [](TailBuffers& b) { b.w_uv_scale += 1; }},
      {"w_uv_scale = ", [](TailBuffers& b) { b.w_uv_scale += 2; }},
      {"output_scale is null", [](TailBuffers& b) { b.output_scale = nullptr; }},
      {"output_scale = ",
       [](TailBuffers& b) {
         b.output_scale = reinterpret_cast<float*>(reinterpret_cast<char*>(b.output_scale) + 2);
       }},
      {"w_uv_scale_head_stride = 2 is below the 4 blocks of a head = 4",
       [](TailBuffers& b) { b.w_uv_scale_head_stride = 2; }},
      {"w_uv_scale_head_stride = 6 is not a multiple of 4 elements",
       [](TailBuffers& b) { b.w_uv_scale_head_stride = 6; }},
      {"w_row_stride = 520 is not a multiple of 16 elements",
       [](TailBuffers& b) { b.w_row_stride = 520; }},
      {"w_head_stride = 65544 is not a multiple of 16 elements",
       [](TailBuffers& b) { b.w_head_stride = 65544; }},
      {"output_row_stride = 520 is not a multiple of 16 elements",
       [](TailBuffers& b) { b.output_row_stride = 520; }},
      {"output_scale_row_stride = 0 is outside [1, kMaxStride]",
       [](TailBuffers& b) { b.output_scale_row_stride = 0; }},
      {"output_scale_head_stride = 0 is outside [1, kMaxStride]",
       [](TailBuffers& b) { b.output_scale_head_stride = 0; }},
      {"output_scale_head_stride = 1099511627777 is outside [1, kMaxStride]",
       [](TailBuffers& b) { b.output_scale_head_stride = (int64_t{1} << 40) + 1; }},
      {"output_scale_row_stride = 1099511627777 is outside [1, kMaxStride]",
       [](TailBuffers& b) { b.output_scale_row_stride = (int64_t{1} << 40) + 1; }},
      {"output_scale_row_stride = 9223372036854775807 is outside [1, kMaxStride]",
       [](TailBuffers& b) { b.output_scale_row_stride = INT64_MAX; }},
      {"w_uv_scale_head_stride = 1099511627780 is above kMaxStride",
       [](TailBuffers& b) { b.w_uv_scale_head_stride = (int64_t{1} << 40) + 4; }},
      {"make scales overlap", [](TailBuffers& b) { b.output_scale_row_stride = 3; }},
      {"make scales overlap",
       [](TailBuffers& b) {
         b.output_scale_row_stride = 1;
         b.output_scale_head_stride = 15;
       }},
      {"w_uv_scale is set without w_uv_fp8",
       [](TailBuffers& b) {
         b.w_uv_fp8 = nullptr;
         b.w_uv = reinterpret_cast<const bf16*>(b.latent) + 64 * 1024;
       }},
      {"output_scale is set without output_fp8",
       [](TailBuffers& b) {
         b.output = reinterpret_cast<bf16*>(b.output_fp8);
         b.output_fp8 = nullptr;
       }},
      {"output_fp8 overlaps gate",
       [](TailBuffers& b) {
         b.output_fp8 = reinterpret_cast<fp8_e4m3*>(const_cast<bf16*>(b.gate));
       }},
      {"output_fp8 overlaps w_uv_fp8",
       [](TailBuffers& b) { b.output_fp8 = const_cast<fp8_e4m3*>(b.w_uv_fp8) + 4096; }},
      {"output_fp8 overlaps w_uv_scale",
       [](TailBuffers& b) {
         b.output_fp8 = reinterpret_cast<fp8_e4m3*>(const_cast<float*>(b.w_uv_scale));
       }},
      {"output_scale overlaps latent",
       [](TailBuffers& b) {
         b.output_scale = reinterpret_cast<float*>(const_cast<bf16*>(b.latent));
       }},
      {"output_scale overlaps output_fp8",
       [](TailBuffers& b) { b.output_scale = reinterpret_cast<float*>(b.output_fp8 + 64); }},
  };
  for (const auto& [message, mutate] : cases) {
    TailBuffers b = f.buffers;
    mutate(b);
    const absl::Status status = ValidateTail(f.shape, b);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message));
  }
}

}  // namespace
}  // namespace mla_tail

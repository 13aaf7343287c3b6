#include "mla_tail/mla/tail_args.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
      {"gate is null", [](TailBuffers& b) { b.gate = nullptr; }},
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

}  // namespace
}  // namespace mla_tail

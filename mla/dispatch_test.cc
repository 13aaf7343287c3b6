// The measured dispatch rule and the fused kernels' selection (CPU only: no kernel runs).

#include "mla/dispatch.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla/kernels/params.h"

namespace mla {
namespace {

// The fused path's kernel choice: forced variants stay, kAuto resolves to a kernel, and the
// address graph/ looks for is the launched kernel's (distinct per kernel).
TEST(MlaValueVariantTest, ResolvesToOneKernel) {
  using V = MlaValueVariant;
  for (int heads : {1, 12, 64, 128}) {
    for (int rows : {1, 63, 64, 65, 1024}) {
      SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows));
      const auto& kernels = kMlaValueKernels;
      for (V forced : kernels) {
        EXPECT_EQ(ResolveMlaValueVariant(forced, heads, rows), forced);
      }
      const V automatic = ResolveMlaValueVariant(V::kAuto, heads, rows);
      EXPECT_NE(std::find(std::begin(kernels), std::end(kernels), automatic), std::end(kernels));
      EXPECT_EQ(MlaValueKernelAddress(heads, rows, V::kAuto),
                MlaValueKernelAddress(heads, rows, automatic));
      EXPECT_EQ(MlaValueKernelAddress(heads, rows),
                MlaValueKernelAddress(heads, rows, automatic));
      for (V a : kernels) {
        for (V b : kernels) {
          if (a == b) continue;
          EXPECT_NE(MlaValueKernelAddress(heads, rows, a), MlaValueKernelAddress(heads, rows, b))
              << MlaValueVariantName(a) << " and " << MlaValueVariantName(b);
        }
      }
    }
  }
}

// The rule against the H200 measurements it was drawn from: at each shape, the kernel it picks
// was the fastest or within 3% of it, or is kept on purpose (MlaValue up to 16 rows at up to 64
// heads, for its start behind an upstream kernel; see mla/dispatch.h for the files).
TEST(DispatchTest, FollowsTheMeasurements) {
  using K = TailKernel;
  const struct {
    int heads, rows;
    K kernel;
  } measured[] = {
      {8, 1, K::kColumnSplit},
      {8, 16, K::kColumnSplit},
      {12, 16, K::kColumnSplit},
      {32, 16, K::kColumnSplit},
      {64, 1, K::kColumnSplit},
      {64, 16, K::kColumnSplit},
      {96, 8, K::kColumnSplit},
      {128, 4, K::kColumnSplit},
      {8, 17, K::kColumnSplit},
      {8, 32, K::kColumnSplit},
      {8, 33, K::kWgmmaA8N32},
      {12, 17, K::kWgmmaA8N32},
      {3, 32, K::kColumnSplit},
      {8, 64, K::kWgmmaA8N32},
      {8, 128, K::kWgmmaA8N32},
      {12, 32, K::kWgmmaA8N32},
      {12, 64, K::kWgmmaA8N32},
      {12, 128, K::kWgmmaA8N32},
      {16, 32, K::kWgmmaA8N32},
      {16, 64, K::kWgmmaA8N32},
      {8, 256, K::kWgmmaA8},
      {12, 256, K::kWgmmaA8},
      {16, 128, K::kWgmmaA8},
      {32, 32, K::kWgmmaA8},
      {32, 64, K::kWgmmaA8},
      {96, 16, K::kWgmmaP6},
      {96, 32, K::kWgmmaP6},
      {96, 64, K::kWgmmaP6},
      {128, 8, K::kWgmmaP6},
      {128, 16, K::kWgmmaP6},
      {128, 32, K::kWgmmaP6},
      {8, 512, K::kWgmmaP6},
      {12, 512, K::kWgmmaP6},
      {16, 256, K::kWgmmaP6},
      {32, 128, K::kWgmmaP6},
      {64, 32, K::kWgmmaP6},
      {64, 64, K::kWgmmaP6},
      {96, 128, K::kWgmmaP4},
      {12, 1024, K::kWgmmaP4},
      {8, 1024, K::kWgmmaN128},
      {16, 512, K::kWgmmaN128},
      {32, 256, K::kWgmmaN128},
      {64, 128, K::kWgmmaN128},
      {128, 64, K::kWgmmaN128},
      {16, 1024, K::kWgmmaWs},
      {32, 512, K::kWgmmaWs},
      {32, 1024, K::kWgmmaWs},
      {64, 256, K::kWgmmaWs},
      {96, 256, K::kWgmmaWs},
      {128, 128, K::kWgmmaWs},
      {128, 1024, K::kWgmmaWs},
  };
  for (const auto& m : measured) {
    EXPECT_EQ(DispatchTail(m.heads, m.rows), m.kernel) << m.heads << " x " << m.rows;
    EXPECT_FALSE(value_bmm(m.heads, m.rows)) << m.heads << " x " << m.rows;
  }
}

// MlaValue's rows a block, against the measurements (bench/results/2026-11-30-h200, tenth to
// twelfth sessions): 8 (latent in registers) up to 8 rows while 4 heads <= 396 blocks and at
// 9-32 rows while 4 heads ceil(rows / 8) <= 132, else 16, and 32 once the 32-row grid still has
// about two blocks a multiprocessor. A distinct kernel each.
TEST(MlaValueBlockRowsTest, EightRowsWhereTheyFitOneWave) {
  for (int heads : {1, 12, 64, 96, 99}) {
    for (int rows : {1, 8}) EXPECT_EQ(MlaValueBlockRows(heads, rows), 8) << heads << " x " << rows;
  }
  for (int heads : {1, 8, 12, 16}) {
    for (int rows : {9, 16}) EXPECT_EQ(MlaValueBlockRows(heads, rows), 8) << heads << " x " << rows;
  }
  for (int heads : {17, 24, 32, 64}) {
    for (int rows : {9, 16}) {
      EXPECT_EQ(MlaValueBlockRows(heads, rows), 16) << heads << " x " << rows;
    }
  }
  for (int heads : {1, 3, 8}) {
    for (int rows : {17, 24, 32}) {
      EXPECT_EQ(MlaValueBlockRows(heads, rows), 8) << heads << " x " << rows;
    }
  }
  EXPECT_EQ(MlaValueBlockRows(8, 33), 16);
  EXPECT_EQ(MlaValueBlockRows(9, 32), 16);
  EXPECT_EQ(MlaValueBlockRows(11, 24), 8);
  EXPECT_EQ(MlaValueKernelAddress(8, 32, MlaValueVariant::kColumnSplit),
            MlaValueKernelAddress(8, 1, MlaValueVariant::kColumnSplit));
  for (int rows : {1, 8, 16}) EXPECT_EQ(MlaValueBlockRows(100, rows), 16) << rows;
  EXPECT_EQ(MlaValueBlockRows(128, 4), 16);
  EXPECT_EQ(MlaValueBlockRows(12, 17), 16);
  EXPECT_EQ(MlaValueBlockRows(12, 32), 16);
  EXPECT_EQ(MlaValueBlockRows(128, 32), 32);
  EXPECT_NE(MlaValueKernelAddress(12, 8, MlaValueVariant::kColumnSplit),
            MlaValueKernelAddress(12, 17, MlaValueVariant::kColumnSplit));
  EXPECT_NE(MlaValueKernelAddress(128, 8, MlaValueVariant::kColumnSplit),
            MlaValueKernelAddress(128, 32, MlaValueVariant::kColumnSplit));
}

}  // namespace
}  // namespace mla

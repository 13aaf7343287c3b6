// The measured dispatch rule and the fused kernels' selection (CPU only: no kernel runs).

#include "mla_tail/mla/dispatch.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla/kernels/launch.h"

namespace mla_tail {
namespace {

using namespace dispatch_internal;  // NOLINT: the rule's parts are tested here

constexpr int kH200 = 132;  // the GPU the rule was measured on (multiprocessors)

// The function PlanFusedKernel launches for a shape and kernel (with e4m3 W_UV or an e4m3 output
// when `weight` or `output` says so: the planner reads the types from the parameters, as the
// launches pass them).
const void* KernelFunction(int heads, int rows, FusedKernel kernel = FusedKernel::kAuto,
                           int multiprocessors = kH200, WeightType weight = WeightType::kBf16,
                           OutputType output = OutputType::kBf16) {
  static const fp8_e4m3 kSomeWeights[16] = {};
  static fp8_e4m3 some_output[16] = {};
  internal::FusedTailParams params = {};
  params.heads = heads;
  params.rows = rows;
  params.q = 1;
  if (weight == WeightType::kE4m3) params.w_uv_fp8 = kSomeWeights;
  if (output == OutputType::kE4m3) params.output_fp8 = some_output;
  internal::KernelLaunch launch;
  EXPECT_EQ(internal::PlanFusedKernel(params, kernel, multiprocessors, &launch), cudaSuccess);
  return launch.function;
}

// The fused path's kernel choice: forced kernels stay, kAuto resolves to a kernel, and the
// planned launch's function is the resolved kernel's (distinct per kernel).
TEST(FusedKernelTest, ResolvesToOneKernel) {
  using V = FusedKernel;
  for (int heads : {1, 12, 64, 128}) {
    for (int rows : {1, 63, 64, 65, 1024}) {
      SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows));
      const auto& kernels = kFusedKernels;
      for (V forced : kernels) {
        EXPECT_EQ(internal::ResolveFusedKernel(forced, heads, rows, kH200), forced);
      }
      const V automatic = internal::ResolveFusedKernel(V::kAuto, heads, rows, kH200);
      EXPECT_NE(std::find(std::begin(kernels), std::end(kernels), automatic), std::end(kernels));
      EXPECT_EQ(KernelFunction(heads, rows, V::kAuto), KernelFunction(heads, rows, automatic));
      for (V a : kernels) {
        for (V b : kernels) {
          if (a == b) continue;
          EXPECT_NE(KernelFunction(heads, rows, a), KernelFunction(heads, rows, b))
              << FusedKernelName(a) << " and " << FusedKernelName(b);
        }
      }
    }
  }
}

// The rule against the H200 measurements it was drawn from: at each shape, the kernel it picks
// was the fastest or within 3% of it, or is kept on purpose for its start behind an upstream
// kernel (ColumnSplit at 49-64 heads x 9-16 rows and at 96-128 heads up to 16 rows, the 6-stage
// ring at 96-128 heads x 32-64 rows, the 4-stage ring wherever it makes one wave; docs/design.md).
// The entries after the blank line lie between the grid's row counts (every kernel forced at
// 8-512 rows in steps of 8, two runs) or its head counts (24-112 heads, one run), where the tiles
// by waves gain up to 1.27x (128 x 80: Persistent128x128's one wave against the 4-stage ring's
// two), and at 20-64 heads x 9-16 rows (LatentSplit and ColumnSplit forced, two runs).
TEST(DispatchTest, FollowsTheMeasurements) {
  using K = FusedKernel;
  const struct {
    int heads, rows;
    K kernel;
  } measured[] = {
      {8, 1, K::kLatentSplit},           {8, 8, K::kLatentSplit},
      {12, 1, K::kLatentSplit},          {12, 8, K::kLatentSplit},
      {16, 4, K::kLatentSplit},          {16, 8, K::kLatentSplit},
      {17, 1, K::kLatentSplit},          {32, 4, K::kLatentSplit},
      {48, 8, K::kLatentSplit},          {48, 2, K::kLatentSplit},
      {49, 1, K::kColumnSplit},          {64, 1, K::kColumnSplit},
      {64, 2, K::kColumnSplit},          {64, 4, K::kLatentSplit},
      {64, 8, K::kLatentSplit},          {65, 1, K::kColumnSplit},
      {32, 9, K::kLatentSplit},          {8, 16, K::kLatentSplit},
      {12, 16, K::kLatentSplit},         {16, 16, K::kLatentSplit},
      {8, 17, K::kLatentSplit},          {8, 32, K::kLatentSplit},
      {3, 32, K::kLatentSplit},          {32, 16, K::kLatentSplit},
      {64, 16, K::kColumnSplit},         {96, 8, K::kColumnSplit},
      {128, 1, K::kColumnSplit},         {128, 4, K::kColumnSplit},
      {8, 33, K::kTile64x32AllSteps},    {12, 17, K::kTile64x32AllSteps},
      {8, 64, K::kTile64x32AllSteps},    {8, 128, K::kTile64x32AllSteps},
      {12, 32, K::kTile64x32AllSteps},   {12, 64, K::kTile64x32AllSteps},
      {12, 96, K::kTile64x32AllSteps},   {16, 32, K::kTile64x32AllSteps},
      {16, 64, K::kTile64x32AllSteps},   {8, 256, K::kTile64x64AllSteps},
      {12, 256, K::kTile64x64Pipeline6}, {16, 128, K::kTile64x64AllSteps},
      {32, 32, K::kTile64x64AllSteps},   {32, 64, K::kTile64x64AllSteps},
      {96, 16, K::kTile64x64Pipeline6},  {96, 32, K::kTile64x64Pipeline6},
      {96, 64, K::kTile64x64Pipeline6},  {128, 8, K::kTile64x64Pipeline6},
      {128, 16, K::kTile64x64Pipeline6}, {128, 32, K::kTile64x64Pipeline6},
      {8, 512, K::kTile64x64Pipeline6},  {12, 512, K::kTile64x128},
      {16, 256, K::kTile64x64Pipeline6}, {32, 128, K::kTile64x64Pipeline6},
      {64, 32, K::kTile64x64Pipeline6},  {64, 64, K::kTile64x64Pipeline6},
      {96, 128, K::kTile64x64Pipeline4}, {12, 1024, K::kTile64x64Pipeline4},
      {8, 1024, K::kTile64x128},         {16, 512, K::kTile64x128},
      {32, 256, K::kTile64x128},         {64, 128, K::kTile64x128},
      {128, 64, K::kTile64x128},         {16, 1024, K::kPersistent128x128},
      {32, 512, K::kPersistent128x128},  {32, 1024, K::kPersistent128x128},
      {64, 256, K::kPersistent128x128},  {96, 256, K::kTile64x64Pipeline4},
      {128, 128, K::kPersistent128x128}, {128, 1024, K::kPersistent128x128},

      {12, 128, K::kTile64x32AllSteps},  {12, 104, K::kTile64x32AllSteps},
      {8, 160, K::kTile64x32AllSteps},   {8, 200, K::kTile64x64AllSteps},
      {16, 288, K::kTile64x128},         {16, 448, K::kTile64x128},
      {32, 160, K::kTile64x128},         {128, 48, K::kTile64x64Pipeline6},
      {32, 392, K::kPersistent128x128},  {64, 160, K::kTile64x64Pipeline4},
      {64, 288, K::kTile64x64Pipeline4}, {64, 384, K::kTile64x64Pipeline4},
      {96, 72, K::kTile64x64Pipeline4},  {96, 80, K::kTile64x64Pipeline4},
      {96, 120, K::kTile64x64Pipeline4}, {96, 160, K::kTile64x64Pipeline4},
      {96, 288, K::kTile64x128},         {96, 384, K::kTile64x64Pipeline4},
      {128, 80, K::kPersistent128x128},  {128, 120, K::kPersistent128x128},
      {48, 40, K::kTile64x64Pipeline6},  {112, 56, K::kTile64x64Pipeline6},
      {80, 72, K::kTile64x64Pipeline4},  {112, 88, K::kPersistent128x128},
      {112, 360, K::kPersistent128x128}, {80, 504, K::kPersistent128x128},
      {20, 10, K::kLatentSplit},         {48, 16, K::kLatentSplit},
      {49, 16, K::kColumnSplit},         {56, 10, K::kColumnSplit},
      {64, 12, K::kColumnSplit},         {49, 9, K::kColumnSplit},
      {65, 11, K::kColumnSplit},
  };
  for (const auto& m : measured) {
    EXPECT_EQ(DispatchFusedKernel(m.heads, m.rows, kH200), m.kernel) << m.heads << " x " << m.rows;
  }
}

// The e4m3 rule against the H200 grid with every kernel forced on e4m3 W_UV: the kernel it
// picks was the fastest or within 3% of it at all 77 shapes. Between the grid's shapes (the
// entries after the blank line), every kernel forced at 8-128 heads x 9-512 rows (one run, the
// 64 x 32 and 64 x 64 tiles converting W_UV with two warpgroups; the rule within 3% of the
// fastest at all 238 shapes but 56 x 80-96, where the 64 x 128 tiles ran 1.035-1.048x the
// 6-stage ring's time):
// - LatentSplit to 32 rows at 8 heads (8 x 32: 1.98 us against 2.23 for the 64 x 32 tiles), to 16
//   at up to 28 heads (24 x 16: 2.48 against 2.63) and at 33-40 heads from 9 rows (40 x 16: 3.37,
//   ColumnSplit 3.35, the tiles 3.57); ColumnSplit to 8 rows from 33 heads and to 16 from 41.
//   With 16-byte e4m3 words in both register kernels (the grid, every kernel forced, and
//   LatentSplit's A/B in the same call) LatentSplit leads at 32 heads too: 32 x 1-8, 2.06-2.29 us
//   against 2.22-2.51 for ColumnSplit; 32 x 16, 2.69 against 2.80 for the 64 x 32 tiles.
// - The 64 x 32 tiles from 17 rows (8 x 40: 2.27 against 2.38 for LatentSplit; 48 x 24: 4.03
//   against 4.41 for ColumnSplit), while
//   their blocks make one wave at two an SM (T <= 66: 64 x 64, 6.14 against 6.15 for the 6-stage
//   ring; 20 x 192, 5.42 against 5.45), from 256 rows to T = 49 (16 x 256: 5.50 in the ring
//   against 5.68; 12 x 320, 5.31 against 5.32); then within one wave of 64-row tiles the ring
//   (24 x 160: 7.06 against 7.57) or, from 0.8 SMs of them, the 64 x 128 tiles (64 x 80: 8.69
//   against 9.22).
// - Past one wave of 64-row tiles, the tiles of DispatchTilesPastOneWave, drawn with the bf16
//   rule's (the 4-stage ring, Persistent128x128 and the 64 x 128 tiles: 80 x 192, 14.76 us against
//   19.40 for Persistent128x128; 112 x 96, 13.68 against 17.66 for the ring; up to 1.14x at
//   64 x 184, where Persistent128x128 ran and the 4-stage ring makes one wave).
TEST(DispatchTest, E4m3FollowsTheMeasurements) {
  using K = FusedKernel;
  const struct {
    int heads, rows;
    K kernel;
  } measured[] = {
      {8, 1, K::kLatentSplit},           {8, 32, K::kLatentSplit},
      {8, 64, K::kTile64x32AllSteps},    {8, 128, K::kTile64x32AllSteps},
      {8, 256, K::kTile64x32AllSteps},   {8, 512, K::kTile64x64Pipeline6},
      {8, 1024, K::kTile64x128},         {12, 32, K::kTile64x32AllSteps},
      {12, 64, K::kTile64x32AllSteps},   {16, 32, K::kTile64x32AllSteps},
      {16, 64, K::kTile64x32AllSteps},   {16, 128, K::kTile64x32AllSteps},
      {32, 1, K::kLatentSplit},          {32, 8, K::kLatentSplit},
      {32, 16, K::kLatentSplit},         {32, 32, K::kTile64x32AllSteps},
      {32, 64, K::kTile64x32AllSteps},   {32, 128, K::kTile64x32AllSteps},
      {64, 1, K::kColumnSplit},          {64, 16, K::kColumnSplit},
      {64, 32, K::kTile64x32AllSteps},   {64, 64, K::kTile64x32AllSteps},
      {64, 128, K::kTile64x128},         {64, 256, K::kPersistent128x128},
      {96, 8, K::kColumnSplit},          {96, 16, K::kColumnSplit},
      {96, 32, K::kTile64x64Pipeline6},  {96, 128, K::kTile64x64Pipeline4},
      {128, 1, K::kColumnSplit},         {128, 16, K::kColumnSplit},
      {128, 32, K::kTile64x128},         {128, 64, K::kTile64x128},
      {128, 128, K::kPersistent128x128}, {128, 256, K::kPersistent128x128},

      {16, 8, K::kLatentSplit},          {16, 12, K::kLatentSplit},
      {16, 16, K::kLatentSplit},         {20, 1, K::kLatentSplit},
      {20, 8, K::kLatentSplit},          {24, 1, K::kLatentSplit},
      {24, 8, K::kLatentSplit},          {28, 1, K::kLatentSplit},
      {28, 8, K::kLatentSplit},          {24, 12, K::kLatentSplit},
      {24, 16, K::kLatentSplit},         {40, 16, K::kLatentSplit},
      {48, 1, K::kColumnSplit},          {40, 8, K::kColumnSplit},
      {48, 8, K::kColumnSplit},          {48, 12, K::kColumnSplit},
      {48, 16, K::kColumnSplit},         {80, 192, K::kTile64x128},
      {112, 96, K::kTile64x128},         {112, 24, K::kTile64x128},
      {112, 48, K::kTile64x128},         {80, 24, K::kTile64x64Pipeline6},
      {80, 48, K::kTile64x64Pipeline6},  {80, 96, K::kTile64x64Pipeline4},
      {48, 192, K::kTile64x64Pipeline4}, {112, 192, K::kPersistent128x128},
      {64, 160, K::kTile64x64Pipeline4}, {96, 80, K::kTile64x64Pipeline4},
      {96, 160, K::kTile64x64Pipeline4}, {96, 224, K::kPersistent128x128},
      {96, 288, K::kTile64x128},         {128, 96, K::kPersistent128x128},
      {32, 400, K::kTile64x128},         {32, 480, K::kPersistent128x128},
      {64, 352, K::kPersistent128x128},  {48, 440, K::kPersistent128x128},
      {80, 72, K::kTile64x64Pipeline4},  {24, 32, K::kTile64x32AllSteps},
      {20, 64, K::kTile64x32AllSteps},   {12, 16, K::kLatentSplit},
      {28, 9, K::kLatentSplit},          {28, 16, K::kLatentSplit},
      {40, 9, K::kLatentSplit},          {80, 16, K::kColumnSplit},
      {8, 40, K::kTile64x32AllSteps},    {8, 48, K::kTile64x32AllSteps},
      {12, 24, K::kTile64x32AllSteps},   {16, 24, K::kTile64x32AllSteps},
      {20, 24, K::kTile64x32AllSteps},   {24, 24, K::kTile64x32AllSteps},
      {28, 24, K::kTile64x32AllSteps},   {40, 24, K::kTile64x32AllSteps},
      {48, 24, K::kTile64x32AllSteps},   {48, 64, K::kTile64x32AllSteps},
      {56, 64, K::kTile64x32AllSteps},   {64, 24, K::kTile64x32AllSteps},
      {64, 40, K::kTile64x32AllSteps},   {8, 384, K::kTile64x32AllSteps},
      {12, 320, K::kTile64x64Pipeline6}, {16, 192, K::kTile64x32AllSteps},
      {20, 192, K::kTile64x32AllSteps},  {24, 128, K::kTile64x32AllSteps},
      {28, 128, K::kTile64x32AllSteps},  {40, 64, K::kTile64x32AllSteps},
      {80, 64, K::kTile64x64Pipeline6},  {24, 160, K::kTile64x64Pipeline6},
      {40, 80, K::kTile64x64Pipeline6},  {48, 96, K::kTile64x64Pipeline6},
      {96, 24, K::kTile64x64Pipeline6},  {128, 24, K::kTile64x128},
      {64, 80, K::kTile64x128},          {56, 128, K::kTile64x128},
  };
  for (const auto& m : measured) {
    EXPECT_EQ(DispatchFusedKernel(m.heads, m.rows, kH200, WeightType::kE4m3), m.kernel)
        << m.heads << " x " << m.rows;
  }
}

// The e4m3 output's rule against the H200 grid with every kernel forced on it, with bf16 and with
// e4m3 W_UV: the kernel it picks was the fastest or within 3% of it at all 77 shapes of each.
// With e4m3 W_UV the all-in-flight 64 x 64 tiles, once two warpgroups converted their W_UV, were
// measured forced against the rule before (the 64 x 32 tiles) over the grid: they lead from 16
// 64-row tiles (16 x 64: 3.56 us against 3.72; 32 x 64: 3.93 against 4.47), and the 64 x 32
// tiles below (12 x 64: 2.98 against 3.52). ColumnSplit leads at 9-16 rows from 48 heads (every
// kernel forced at 8-96 heads x 16-384 rows; 48 x 16: 4.53 against 4.76 for the 64 x 32 tiles).
TEST(DispatchTest, E4m3OutputFollowsTheMeasurements) {
  using K = FusedKernel;
  const struct {
    int heads, rows;
    K bf16_weights, e4m3_weights;
  } measured[] = {
      {8, 1, K::kColumnSplit, K::kLatentSplit},
      {8, 16, K::kColumnSplit, K::kLatentSplit},
      {8, 32, K::kColumnSplit, K::kTile64x32AllSteps},
      {8, 64, K::kTile64x32AllSteps, K::kTile64x32AllSteps},
      {8, 256, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {8, 512, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {8, 1024, K::kTile64x128, K::kTile64x128},
      {12, 8, K::kColumnSplit, K::kLatentSplit},
      {12, 16, K::kColumnSplit, K::kLatentSplit},
      {12, 32, K::kTile64x32AllSteps, K::kTile64x32AllSteps},
      {12, 64, K::kTile64x32AllSteps, K::kTile64x32AllSteps},
      {12, 128, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {12, 256, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {12, 512, K::kTile64x128, K::kTile64x64Pipeline6},
      {12, 1024, K::kTile64x64Pipeline4, K::kTile64x64Pipeline4},
      {16, 1, K::kColumnSplit, K::kLatentSplit},
      {16, 8, K::kColumnSplit, K::kLatentSplit},
      {16, 16, K::kColumnSplit, K::kLatentSplit},
      {16, 32, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {16, 128, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {16, 256, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {16, 1024, K::kPersistent128x128, K::kPersistent128x128},
      {32, 1, K::kColumnSplit, K::kColumnSplit},
      {32, 8, K::kColumnSplit, K::kColumnSplit},
      {32, 16, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {32, 32, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {32, 64, K::kTile64x64AllSteps, K::kTile64x64AllSteps},
      {32, 128, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {32, 512, K::kPersistent128x128, K::kPersistent128x128},
      {32, 1024, K::kPersistent128x128, K::kPersistent128x128},
      {64, 1, K::kColumnSplit, K::kColumnSplit},
      {64, 8, K::kColumnSplit, K::kColumnSplit},
      {64, 16, K::kTile64x64Pipeline6, K::kColumnSplit},
      {64, 32, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {64, 64, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {64, 256, K::kPersistent128x128, K::kPersistent128x128},
      {96, 1, K::kColumnSplit, K::kColumnSplit},
      {96, 4, K::kColumnSplit, K::kColumnSplit},
      {96, 8, K::kTile64x64Pipeline6, K::kColumnSplit},
      {96, 16, K::kTile64x64Pipeline6, K::kColumnSplit},
      {96, 32, K::kTile64x64Pipeline6, K::kTile64x64Pipeline6},
      {96, 128, K::kTile64x64Pipeline4, K::kTile64x64Pipeline4},
      {96, 256, K::kTile64x64Pipeline4, K::kPersistent128x128},
      {128, 1, K::kTile64x128, K::kColumnSplit},
      {128, 16, K::kTile64x128, K::kColumnSplit},
      {128, 32, K::kTile64x128, K::kTile64x128},
      {128, 256, K::kPersistent128x128, K::kPersistent128x128},
  };
  for (const auto& m : measured) {
    EXPECT_EQ(DispatchFusedKernel(m.heads, m.rows, kH200, WeightType::kBf16, OutputType::kE4m3),
              m.bf16_weights)
        << m.heads << " x " << m.rows;
    EXPECT_EQ(DispatchFusedKernel(m.heads, m.rows, kH200, WeightType::kE4m3, OutputType::kE4m3),
              m.e4m3_weights)
        << m.heads << " x " << m.rows;
  }
}

// Between the grid's shapes the e4m3 output's tiles go by waves, as the bf16 output's: at these
// shapes (every kernel forced on the e4m3 output, H200) the kernel picked was within 1% of the
// fastest, where the grid's thresholds took one 1.15-1.40x slower (Persistent128x128 at 88 x 192:
// 18.69 against 13.35 us for the 64 x 128 tiles).
TEST(DispatchTest, E4m3OutputTilesGoByWaves) {
  using K = FusedKernel;
  const struct {
    int heads, rows;
    WeightType weight;
    K kernel;
  } measured[] = {
      {96, 144, WeightType::kBf16, K::kTile64x64Pipeline4},
      {96, 288, WeightType::kBf16, K::kTile64x128},
      {40, 408, WeightType::kBf16, K::kTile64x64Pipeline4},
      {88, 192, WeightType::kBf16, K::kTile64x128},
      {56, 24, WeightType::kE4m3, K::kTile64x64Pipeline6},
  };
  for (const auto& m : measured) {
    EXPECT_EQ(DispatchFusedKernel(m.heads, m.rows, kH200, m.weight, OutputType::kE4m3), m.kernel)
        << m.heads << " x " << m.rows;
  }
}

// The planner takes the e4m3 output's rule for an e4m3 output: at 128 heads x 1 row the 64 x 128
// tiles (bf16 W_UV), where the bf16 output's rule runs ColumnSplit.
TEST(DispatchTest, E4m3OutputIsPlannedByItsRule) {
  using K = FusedKernel;
  const WeightType bf16 = WeightType::kBf16;
  const OutputType e4m3 = OutputType::kE4m3;
  EXPECT_EQ(KernelFunction(128, 1, K::kAuto, kH200, bf16, e4m3),
            KernelFunction(128, 1, K::kTile64x128, kH200, bf16, e4m3));
  EXPECT_EQ(KernelFunction(128, 1), KernelFunction(128, 1, K::kColumnSplit));
  EXPECT_EQ(KernelFunction(8, 1, K::kAuto, kH200, bf16, e4m3),
            KernelFunction(8, 1, K::kColumnSplit, kH200, bf16, e4m3));
  EXPECT_EQ(KernelFunction(8, 1), KernelFunction(8, 1, K::kLatentSplit));
}

// The planner takes the e4m3 rule for e4m3 W_UV: at 128 heads x 16 rows the bf16 rule's
// 6-stage pipeline, the e4m3 rule's ColumnSplit; at 32 x 24 the bf16 rule's 64 x 64 tiles, the
// e4m3 rule's 64 x 32 tiles.
TEST(DispatchTest, E4m3WeightsArePlannedByTheE4m3Rule) {
  using K = FusedKernel;
  const WeightType e4m3 = WeightType::kE4m3;
  EXPECT_EQ(KernelFunction(128, 16, K::kAuto, kH200, e4m3),
            KernelFunction(128, 16, K::kColumnSplit, kH200, e4m3));
  EXPECT_NE(KernelFunction(128, 16, K::kAuto, kH200, e4m3),
            KernelFunction(128, 16, K::kTile64x64Pipeline6, kH200, e4m3));
  EXPECT_EQ(KernelFunction(128, 16), KernelFunction(128, 16, K::kTile64x64Pipeline6));
  EXPECT_EQ(KernelFunction(32, 24, K::kAuto, kH200, e4m3),
            KernelFunction(32, 24, K::kTile64x32AllSteps, kH200, e4m3));
  EXPECT_EQ(KernelFunction(32, 24), KernelFunction(32, 24, K::kTile64x64AllSteps));
  EXPECT_EQ(KernelFunction(32, 32), KernelFunction(32, 32, K::kTile64x64AllSteps));
}

// Outside its domain (ValidateShape's shapes, at least one SM) the rule clamps its inputs: no
// overflow, no division by zero (tools/ubsan.sh runs this), the nearest valid shape's kernel.
TEST(DispatchTest, ClampsValuesOutsideItsDomain) {
  constexpr int kMin = std::numeric_limits<int>::min(), kMax = std::numeric_limits<int>::max();
  for (WeightType weight : {WeightType::kBf16, WeightType::kE4m3}) {
    for (OutputType output : {OutputType::kBf16, OutputType::kE4m3}) {
      EXPECT_EQ(DispatchFusedKernel(128, 4096, 0, weight, output),
                DispatchFusedKernel(128, 4096, 1, weight, output));
      EXPECT_EQ(DispatchFusedKernel(1, kMax - 100, 132, weight, output),
                DispatchFusedKernel(1, kMaxRows, 132, weight, output));
      EXPECT_EQ(DispatchFusedKernel(kMax, kMax, kMax, weight, output),
                DispatchFusedKernel(kMaxHeads, kMaxRows, kMax, weight, output));
      EXPECT_EQ(DispatchFusedKernel(kMin, kMin, kMin, weight, output),
                DispatchFusedKernel(1, 1, 1, weight, output));
    }
  }
  EXPECT_FALSE(LatentSplitBlocksFitOneWave(1, kMax, 132));
}

// The SM count enters where the rule counts waves: a GPU with fewer SMs moves the 16-row
// LatentSplit blocks', the 8-row ColumnSplit blocks' and the one-wave 64 x 128 tiles' ranges
// with it.
TEST(DispatchTest, FollowsTheMultiprocessorCount) {
  EXPECT_EQ(DispatchFusedKernel(8, 32, kH200), FusedKernel::kLatentSplit);
  EXPECT_EQ(DispatchFusedKernel(8, 32, 114), FusedKernel::kTile64x32AllSteps);
  EXPECT_EQ(DispatchFusedKernel(4, 32, 64), FusedKernel::kLatentSplit);
  EXPECT_EQ(DispatchFusedKernel(4, 32, 63), FusedKernel::kTile64x32AllSteps);
  EXPECT_EQ(DispatchFusedKernel(8, 24, 128), FusedKernel::kLatentSplit);
  EXPECT_EQ(DispatchFusedKernel(8, 24, 127), FusedKernel::kColumnSplit);
  EXPECT_EQ(DispatchFusedKernel(8, 1024, kH200), FusedKernel::kTile64x128);
  EXPECT_EQ(DispatchFusedKernel(7, 1024, 114), FusedKernel::kTile64x128);
  EXPECT_NE(DispatchFusedKernel(8, 1024, 114), FusedKernel::kTile64x128);
  EXPECT_EQ(internal::ColumnSplitBlockRows(99, 8, kH200), 8);
  EXPECT_EQ(internal::ColumnSplitBlockRows(99, 8, 114), 16);
}

// The wave arithmetic the tile rule counts with, and the shapes at its edges on 132 SMs.
TEST(DispatchTest, TilesByWavesOnTheH200) {
  EXPECT_EQ(Waves(132, kH200), 1);
  EXPECT_EQ(Waves(133, kH200), 2);
  EXPECT_TRUE(FillsWaves(119, kH200, 9, 10));  // 119 of 132
  EXPECT_FALSE(FillsWaves(118, kH200, 9, 10));
  EXPECT_FALSE(FillsWaves(192, kH200, 9, 10));  // 192 of 264
  EXPECT_TRUE(FillsWaves(256, kH200, 9, 10));
  EXPECT_TRUE(FillsWaves(224, kH200, 4, 5));  // 224 of 264
  // 480 64 x 128 tiles fill 480 of 528 slots, the ring's 960 blocks 960 of 1188.
  EXPECT_TRUE(FillsWavesMore(480, 2 * kH200, 960, 3 * kH200));
  EXPECT_FALSE(FillsWavesMore(384, 2 * kH200, 768, 3 * kH200));
  // Within one wave of 64-row tiles: the 64 x 128 tiles from 64 rows past 0.9 of the SMs, from
  // 128 rows past half of them.
  EXPECT_EQ(DispatchFusedKernel(119, 64, kH200), FusedKernel::kTile64x128);
  EXPECT_EQ(DispatchFusedKernel(118, 64, kH200), FusedKernel::kTile64x64Pipeline6);
  EXPECT_EQ(DispatchFusedKernel(12, 384, kH200), FusedKernel::kTile64x128);
  EXPECT_EQ(DispatchFusedKernel(11, 384, kH200), FusedKernel::kTile64x64Pipeline6);
  EXPECT_EQ(DispatchFusedKernel(128, 32, kH200), FusedKernel::kTile64x64Pipeline6);
  // The ring while its blocks make one wave (198 tiles of 64 rows); past it Persistent128x128
  // where its tiles hold no more empty rows than the 64-row ones and fill 0.75 of a wave, else
  // here the 64 x 128 tiles.
  EXPECT_EQ(DispatchFusedKernel(99, 128, kH200), FusedKernel::kTile64x64Pipeline4);
  EXPECT_EQ(DispatchFusedKernel(100, 128, kH200), FusedKernel::kPersistent128x128);
  EXPECT_EQ(DispatchFusedKernel(96, 288, kH200), FusedKernel::kTile64x128);
}

// ColumnSplit's rows a block, against the measurements (docs/design.md): 8 (latent in registers)
// up to 8 rows while 4 heads <= 396 blocks and at 9-32 rows while 4 heads ceil(rows / 8) <= 132,
// else 16, and 32 once the 32-row grid still has about two blocks a multiprocessor. A distinct
// kernel each.
TEST(ColumnSplitBlockRowsTest, EightRowsWhereTheyFitOneWave) {
  for (int heads : {1, 12, 64, 96, 99}) {
    for (int rows : {1, 8})
      EXPECT_EQ(internal::ColumnSplitBlockRows(heads, rows, kH200), 8) << heads << " x " << rows;
  }
  for (int heads : {1, 8, 12, 16}) {
    for (int rows : {9, 16})
      EXPECT_EQ(internal::ColumnSplitBlockRows(heads, rows, kH200), 8) << heads << " x " << rows;
  }
  for (int heads : {17, 24, 32, 64}) {
    for (int rows : {9, 16}) {
      EXPECT_EQ(internal::ColumnSplitBlockRows(heads, rows, kH200), 16) << heads << " x " << rows;
    }
  }
  for (int heads : {1, 3, 8}) {
    for (int rows : {17, 24, 32}) {
      EXPECT_EQ(internal::ColumnSplitBlockRows(heads, rows, kH200), 8) << heads << " x " << rows;
    }
  }
  EXPECT_EQ(internal::ColumnSplitBlockRows(8, 33, kH200), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(9, 32, kH200), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(11, 24, kH200), 8);
  EXPECT_EQ(KernelFunction(8, 32, FusedKernel::kColumnSplit),
            KernelFunction(8, 1, FusedKernel::kColumnSplit));
  for (int rows : {1, 8, 16})
    EXPECT_EQ(internal::ColumnSplitBlockRows(100, rows, kH200), 16) << rows;
  EXPECT_EQ(internal::ColumnSplitBlockRows(128, 4, kH200), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(12, 17, kH200), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(12, 32, kH200), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(128, 32, kH200), 32);
  // 32-row blocks from two a multiprocessor: 4 * heads * (rows / 32) >= 2 * SMs (264 at 132).
  EXPECT_EQ(internal::ColumnSplitBlockRows(66, 32, kH200), 32);
  EXPECT_EQ(internal::ColumnSplitBlockRows(65, 32, kH200), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(65, 32, 130), 32);
  EXPECT_EQ(internal::ColumnSplitBlockRows(33, 64, kH200), 32);
  EXPECT_EQ(internal::ColumnSplitBlockRows(32, 64, kH200), 16);
  EXPECT_NE(KernelFunction(12, 8, FusedKernel::kColumnSplit),
            KernelFunction(12, 17, FusedKernel::kColumnSplit));
  EXPECT_NE(KernelFunction(128, 8, FusedKernel::kColumnSplit),
            KernelFunction(128, 32, FusedKernel::kColumnSplit));
}

// e4m3 W_UV: 64 columns a block, so 2 blocks a head: 8-row blocks up to 8 rows while 2 heads <=
// 396 (198 heads), never past 8 rows; 32-row blocks from 2 heads (rows / 32) >= 264.
TEST(ColumnSplitBlockRowsTest, E4m3BlocksCountTwoAHead) {
  constexpr WeightType kE4m3 = WeightType::kE4m3;
  for (int heads : {1, 64, 128, 198}) {
    for (int rows : {1, 8}) {
      EXPECT_EQ(internal::ColumnSplitBlockRows(heads, rows, kH200, kE4m3), 8)
          << heads << " x " << rows;
    }
  }
  EXPECT_EQ(internal::ColumnSplitBlockRows(199, 8, kH200, kE4m3), 16);
  for (int heads : {1, 8, 16}) {
    for (int rows : {9, 16, 32})
      EXPECT_EQ(internal::ColumnSplitBlockRows(heads, rows, kH200, kE4m3), 16) << heads;
  }
  EXPECT_EQ(internal::ColumnSplitBlockRows(132, 32, kH200, kE4m3), 32);
  EXPECT_EQ(internal::ColumnSplitBlockRows(131, 32, kH200, kE4m3), 16);
  EXPECT_EQ(internal::ColumnSplitBlockRows(66, 64, kH200, kE4m3), 32);
}

// LatentSplit: 8-row blocks of 8 warps up to 8 rows, 16-row blocks of 4 warps above; 16
// columns a block.
TEST(LatentSplitTest, RowsAndWarpsByBatch) {
  internal::FusedTailParams params = {};
  params.heads = 12;
  params.q = 1;
  for (const auto& [rows, tiles, threads] : {std::tuple{1, 1, 256},
                                             {8, 1, 256},
                                             {9, 1, 128},
                                             {16, 1, 128},
                                             {17, 2, 128},
                                             {32, 2, 128}}) {
    params.rows = rows;
    internal::KernelLaunch launch;
    ASSERT_EQ(internal::PlanFusedKernel(params, FusedKernel::kLatentSplit, kH200, &launch),
              cudaSuccess);
    EXPECT_EQ(launch.grid.x, 8u) << rows;
    EXPECT_EQ(launch.grid.y, 12u) << rows;
    EXPECT_EQ(launch.grid.z, static_cast<unsigned>(tiles)) << rows;
    EXPECT_EQ(launch.block.x, static_cast<unsigned>(threads)) << rows;
    EXPECT_EQ(launch.smem_bytes, 0u) << rows;  // static only
  }
  EXPECT_NE(KernelFunction(12, 8, FusedKernel::kLatentSplit),
            KernelFunction(12, 9, FusedKernel::kLatentSplit));
}

// An absent gate's stride, which validation does not look at, reaches the kernels as 0 on both
// paths (the forms that run with a gate and without form its offsets before testing for it).
TEST(KernelParamsTest, AnAbsentGatesStrideIsZero) {
  TailBuffers b;
  b.gate = nullptr;
  b.gate_row_stride = std::numeric_limits<int64_t>::max();
  const TailShape shape{12, 4, 1};
  EXPECT_EQ(internal::MakeFusedTailParams(shape, b).gate_row_stride, 0);
  alignas(8) unsigned char tables[internal::kOperandTableBytes];
  EXPECT_EQ(internal::MakeBmmPointerParams(shape, b, nullptr, tables).gate.gate_row_stride, 0);
  static const bf16 kSomeGate[8] = {};
  b.gate = kSomeGate;
  b.gate_row_stride = 1536;
  EXPECT_EQ(internal::MakeFusedTailParams(shape, b).gate_row_stride, 1536);
  EXPECT_EQ(internal::MakeBmmPointerParams(shape, b, nullptr, tables).gate.gate_row_stride, 1536);
}

}  // namespace
}  // namespace mla_tail

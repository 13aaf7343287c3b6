// Whether the GPU suites' data can tell a wrong tail from a right one. Four deliberately wrong
// tails, each computed from the reference's own exact sum and sigmoid, are compared with
// OutputAgrees(exact = true), as the suites compare the kernels, on the problems the suites
// build (default ProblemOptions, their shapes, their sampled rows), computed on the host exactly
// as Problem fills them on the GPU:
//   - the sigmoid rounded to bf16 before the product;
//   - no bf16(v) step: the FP32 sum times the sigmoid;
//   - the output rounded toward zero instead of to nearest even;
//   - v truncated (rounded toward zero) instead of rounded to nearest even.
// Each must be rejected on a large share of the elements, and on some element of every problem:
// a wrong tail that one of the suites' checks could pass fails this test. The right tail, with
// either end of the sigmoid's allowed range, must pass everywhere.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/problem_data.h"
#include "testing/support/reference.h"

namespace mla_tail_testing {
namespace {

// The least share of the compared elements on which each wrong tail must be rejected.
constexpr double kLeastRejectedShare = 0.10;

// bf16 by truncation (rounding toward zero); NaN stays NaN.
uint16_t TruncatedBf16(float f) {
  if (std::isnan(f)) return 0x7fc0;
  return static_cast<uint16_t>(FloatBits(f) >> 16);
}

struct Tail {
  const char* name;
  const char* key;  // for the test's recorded properties
  uint16_t (*output)(const ReferenceElement& r);
};

const Tail kWrongTails[] = {
    {"sigmoid rounded to bf16", "sigmoid_rounded",
     [](const ReferenceElement& r) {
       return FloatToBf16(Bf16ToFloat(r.v) * Bf16ToFloat(FloatToBf16(r.s.nearest)));
     }},
    {"no bf16(v) step", "no_v_rounding",
     [](const ReferenceElement& r) {
       return FloatToBf16(static_cast<float>(r.acc) * r.s.nearest);
     }},
    {"output rounded toward zero", "output_toward_zero",
     [](const ReferenceElement& r) { return TruncatedBf16(Bf16ToFloat(r.v) * r.s.nearest); }},
    {"v truncated", "v_truncated",
     [](const ReferenceElement& r) {
       return FloatToBf16(Bf16ToFloat(TruncatedBf16(static_cast<float>(r.acc))) * r.s.nearest);
     }},
};

const Tail kRightTails[] = {
    {"right, lowest allowed sigmoid", "right_low",
     [](const ReferenceElement& r) { return FloatToBf16(Bf16ToFloat(r.v) * r.s.low); }},
    {"right, highest allowed sigmoid", "right_high",
     [](const ReferenceElement& r) { return FloatToBf16(Bf16ToFloat(r.v) * r.s.high); }},
};

// Problems as the GPU suites build them with the default data: heads x rows x q and a seed.
std::vector<ProblemOptions> SuiteProblems() {
  std::vector<ProblemOptions> problems;
  const struct {
    int heads, rows, q;
  } shapes[] = {{12, 16, 1}, {64, 5, 1},  {12, 64, 1}, {3, 100, 1}, {16, 48, 3},
                {1, 129, 1}, {128, 2, 1}, {24, 40, 2}, {8, 32, 4},  {63, 3, 1}};
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    ProblemOptions o;
    o.shape = {s.heads, s.rows, s.q};
    o.seed = seed++;
    problems.push_back(o);
  }
  return problems;
}

struct Counts {
  int64_t compared = 0;  // active elements whose reference is not NaN
  std::vector<int64_t> rejected;
};

TEST(WrongTailsTest, TheSuitesDataRejectEveryWrongTail) {
  constexpr int kWrong = sizeof(kWrongTails) / sizeof(kWrongTails[0]);
  constexpr int kRight = sizeof(kRightTails) / sizeof(kRightTails[0]);
  Counts total;
  total.rejected.assign(kWrong + kRight, 0);
  // What the data is: where |acc| lies, ties, gates inside and below the branch-free range.
  int64_t rounding = 0, ties = 0, acc_in_range = 0, gates_below = 0, gates_saturated = 0;
  for (const ProblemOptions& options : SuiteProblems()) {
    SCOPED_TRACE(testing::Message() << "heads " << options.shape.heads << " rows "
                                    << options.shape.rows << " q " << options.shape.q);
    const ReferenceInputs in = HostReferenceInputs(options);
    Counts problem;
    problem.rejected.assign(kWrong + kRight, 0);
    for (int t : SampleRows(options)) {
      for (int h = 0; h < options.shape.heads; ++h) {
        for (int d = 0; d < 128; ++d) {
          const ReferenceElement r = ReferenceOutput(in, t, h, d);
          if (!r.active || Bf16IsNan(r.out)) continue;
          ++problem.compared;
          const double a = std::fabs(r.acc);
          acc_in_range += a >= 257 && a <= 4096;
          rounding += static_cast<double>(Bf16ToFloat(r.v)) != r.acc;
          // A tie: the exact sum halfway between two bf16 values.
          const double step =
              std::fabs(static_cast<double>(Bf16ToFloat(Bf16Next(r.v, true))) - Bf16ToFloat(r.v));
          ties += a > 256 && std::fabs(std::fabs(Bf16ToFloat(r.v)) - a) * 2 == step;
          const float g = Bf16ToFloat(in.gate(t, h * 128 + d));
          gates_below += g < -87.3f;
          gates_saturated += r.s.low == r.s.high;
          std::string why;
          for (int i = 0; i < kWrong; ++i) {
            problem.rejected[i] += !OutputAgrees(r, kWrongTails[i].output(r), true, &why);
          }
          for (int i = 0; i < kRight; ++i) {
            const bool agrees = OutputAgrees(r, kRightTails[i].output(r), true, &why);
            problem.rejected[kWrong + i] += !agrees;
            EXPECT_TRUE(agrees) << kRightTails[i].name << ": " << why;
          }
        }
      }
    }
    ASSERT_GT(problem.compared, 0);
    for (int i = 0; i < kWrong; ++i) {
      EXPECT_GT(problem.rejected[i], 0)
          << "the suites' check of this problem passes the wrong tail \"" << kWrongTails[i].name
          << "\"";
      total.rejected[i] += problem.rejected[i];
    }
    total.compared += problem.compared;
  }

  const double n = static_cast<double>(total.compared);
  std::printf(
      "%lld active elements compared over %zu problems: |acc| in [257, 4096] %.1f%%, "
      "v rounded %.1f%%, ties %.1f%%, gates below -87.3 %.2f%%, sigmoid pinned to one "
      "FP32 value %.1f%%\n",
      static_cast<long long>(total.compared), SuiteProblems().size(), 100 * acc_in_range / n,
      100 * rounding / n, 100 * ties / n, 100 * gates_below / n, 100 * gates_saturated / n);
  for (int i = 0; i < kWrong; ++i) {
    const double share = total.rejected[i] / n;
    std::printf("  wrong tail %-28s rejected on %5.1f%% of elements\n", kWrongTails[i].name,
                100 * share);
    RecordProperty(std::string("rejected_percent_") + kWrongTails[i].key,
                   std::to_string(100 * share));
    EXPECT_GE(share, kLeastRejectedShare) << kWrongTails[i].name;
  }
}

}  // namespace
}  // namespace mla_tail_testing

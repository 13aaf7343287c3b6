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
//
// The same for the e4m3 suite (testing/fp8_gpu_test.cc): its bit-exact data sets of e4m3 W_UV
// against wrong dequantizations, and the bf16 outputs it quantizes against wrong quantizations
// of the e4m3 output.

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/e4m3_bits.h"
#include "testing/support/fp8_data.h"
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

// ---------------------------------------------------------------------------------------------
// e4m3 W_UV and the e4m3 output.

// A wrong dequantization of W_UV: the weight a latent value of block `block` (k / 128) is
// multiplied by, from its code and the head's four scales, exactly in double.
struct Dequantization {
  const char* name;
  const char* key;
  double (*w)(uint8_t c, int block, const std::array<float, 4>& scales);
};

const Dequantization kWrongDequantizations[] = {
    {"scale applied to the FP32 partial sums of each block", "scale_on_partial_sums",
     [](uint8_t c, int block, const std::array<float, 4>& s) {
       // Each block's sum of latent * float(c), times its scale: in exact arithmetic the sum of
       // latent * (c * s), with the product unrounded (4 x 24 significant bits, exact in double).
       return double{E4m3ToFloat(c)} * double{s[block]};
     }},
    {"scale rounded to bf16 first", "scale_bf16",
     [](uint8_t c, int block, const std::array<float, 4>& s) {
       return double{Bf16ToFloat(FloatToBf16(E4m3ToFloat(c) * Bf16ToFloat(FloatToBf16(s[block]))))};
     }},
    {"dequantized value truncated to bf16", "w_toward_zero",
     [](uint8_t c, int block, const std::array<float, 4>& s) {
       return double{Bf16ToFloat(TruncatedBf16(E4m3ToFloat(c) * s[block]))};
     }},
    {"the next block's scale", "next_block_scale",
     [](uint8_t c, int block, const std::array<float, 4>& s) {
       return double{Bf16ToFloat(DequantizeE4m3(c, s[(block + 1) % 4]))};
     }},
    {"block 0's scale for every block", "first_block_scale",
     [](uint8_t c, int, const std::array<float, 4>& s) {
       return double{Bf16ToFloat(DequantizeE4m3(c, s[0]))};
     }},
};

// A quantization of one (row, head) of the e4m3 output from its 128 bf16 values `x` (and the
// FP32 values before their bf16 rounding, `unrounded`).
struct Quantization {
  const char* name;
  const char* key;
  QuantizedHead (*quantize)(const std::array<uint16_t, 128>& x,
                            const std::array<float, 128>& unrounded);
  // Whether every problem must reject it. The others differ only where x * (448 / amax) lies
  // within an FP32 rounding of an e4m3 tie, or on a tie itself: about 1% and 12% of the groups,
  // which the suite finds by checking every row of every problem.
  bool every_problem = true;
};

// e4m3 rounded toward zero, or to nearest with ties away from zero; saturating, NaN kept.
uint8_t E4m3TowardZero(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  uint8_t code = 0;
  while (code < 0x7e && E4m3ToFloat(static_cast<uint8_t>(code + 1)) <= std::fabs(f)) ++code;
  return sign | code;
}
uint8_t E4m3TiesAway(float f) {
  const uint8_t down = E4m3TowardZero(f);
  if (std::isnan(f) || (down & 0x7f) == 0x7e) return down;
  const float low = std::fabs(E4m3ToFloat(down));
  const float high = std::fabs(E4m3ToFloat(static_cast<uint8_t>(down + 1)));
  return std::fabs(f) - low >= high - std::fabs(f) ? static_cast<uint8_t>(down + 1) : down;
}

// QuantizeHead's steps with some replaced: amax over `value` (of the magnitudes, or with
// `signed_amax` of the values), the scale from `scale_of`, each value times the inverse (or
// whatever `multiply` makes of it and the scale) encoded by `encode`.
template <typename Values>
QuantizedHead QuantizeWith(const Values& values, float (*value)(const Values&, int),
                           float (*scale_of)(float), float (*multiply)(float, float, float),
                           uint8_t (*encode)(float), bool signed_amax = false) {
  QuantizedHead q;
  float amax = signed_amax ? -std::numeric_limits<float>::infinity() : 0.0f;
  bool nan = false;
  for (int d = 0; d < 128; ++d) {
    const float x = value(values, d);
    nan = nan || std::isnan(x);
    const float m = signed_amax ? x : std::fabs(x);
    amax = m > amax ? m : amax;
  }
  if (nan) amax = std::numeric_limits<float>::quiet_NaN();
  q.scale = scale_of(amax);
  const float inverse = kE4m3Max / amax;
  if (std::isinf(inverse)) return q;
  for (int d = 0; d < 128; ++d) q.values[d] = encode(multiply(value(values, d), inverse, q.scale));
  return q;
}
float Bf16Value(const std::array<uint16_t, 128>& x, int d) { return Bf16ToFloat(x[d]); }
float FloatValue(const std::array<float, 128>& x, int d) { return x[d]; }
float RightScale(float amax) { return amax / kE4m3Max; }
float TimesInverse(float x, float inverse, float) { return x * inverse; }

const Quantization kWrongQuantizations[] = {
    {"values divided by the scale", "divided_by_scale",
     [](const std::array<uint16_t, 128>& x, const std::array<float, 128>&) {
       return QuantizeWith<std::array<uint16_t, 128>>(
           x, Bf16Value, RightScale, [](float v, float, float scale) { return v / scale; },
           FloatToE4m3);
     },
     false},
    {"values times the reciprocal of the scale", "times_reciprocal_of_scale",
     [](const std::array<uint16_t, 128>& x, const std::array<float, 128>&) {
       return QuantizeWith<std::array<uint16_t, 128>>(
           x, Bf16Value, RightScale, [](float v, float, float scale) { return v * (1.0f / scale); },
           FloatToE4m3);
     },
     false},
    {"scale as amax times 1/448", "scale_times_reciprocal",
     [](const std::array<uint16_t, 128>& x, const std::array<float, 128>&) {
       return QuantizeWith<std::array<uint16_t, 128>>(
           x, Bf16Value, [](float amax) { return amax * (1.0f / kE4m3Max); }, TimesInverse,
           FloatToE4m3);
     }},
    {"e4m3 rounded toward zero", "e4m3_toward_zero",
     [](const std::array<uint16_t, 128>& x, const std::array<float, 128>&) {
       return QuantizeWith<std::array<uint16_t, 128>>(x, Bf16Value, RightScale, TimesInverse,
                                                      E4m3TowardZero);
     }},
    {"e4m3 ties away from zero", "e4m3_ties_away",
     [](const std::array<uint16_t, 128>& x, const std::array<float, 128>&) {
       return QuantizeWith<std::array<uint16_t, 128>>(x, Bf16Value, RightScale, TimesInverse,
                                                      E4m3TiesAway);
     },
     false},
    {"quantized before the bf16 rounding", "before_bf16_rounding",
     [](const std::array<uint16_t, 128>&, const std::array<float, 128>& unrounded) {
       return QuantizeWith<std::array<float, 128>>(unrounded, FloatValue, RightScale, TimesInverse,
                                                   FloatToE4m3);
     }},
    {"amax as the largest value, not magnitude", "signed_amax",
     [](const std::array<uint16_t, 128>& x, const std::array<float, 128>&) {
       return QuantizeWith<std::array<uint16_t, 128>>(x, Bf16Value, RightScale, TimesInverse,
                                                      FloatToE4m3, true);
     }},
};

bool SameQuantization(const QuantizedHead& a, const QuantizedHead& b) {
  const bool scales =
      FloatBits(a.scale) == FloatBits(b.scale) || (std::isnan(a.scale) && std::isnan(b.scale));
  for (int d = 0; d < 128; ++d) {
    const bool nan = E4m3IsNan(a.values[d]) && E4m3IsNan(b.values[d]);
    if (!nan && a.values[d] != b.values[d]) return false;
  }
  return scales;
}

// The e4m3 suite's bit-exact problems: its grid's four data sets (Fp8WeightGridTest, whose
// first kernel is compared with the reference exactly) at shapes of the grid, and bf16 W_UV with
// uniform gates (Bf16WeightsWithE4m3Output).
struct E4m3Problem {
  ProblemOptions options;
  bool e4m3_weights;
  Fp8WeightOptions weights;
};
std::vector<E4m3Problem> E4m3SuiteProblems() {
  const std::array<std::pair<E4m3Values, E4m3Scales>, 4> data = {
      {{E4m3Values::kSmallIntegers, E4m3Scales::kPowersOfTwo},
       {E4m3Values::kEdges, E4m3Scales::kPowersOfTwo},
       {E4m3Values::kIntegersToThree, E4m3Scales::kOdd},
       {E4m3Values::kEdges, E4m3Scales::kSomeZero}}};
  const struct {
    int heads, rows, q;
  } shapes[] = {{1, 17, 1}, {12, 64, 1}, {64, 2, 1}, {128, 1, 1}, {12, 32, 2}};
  std::vector<E4m3Problem> problems;
  for (const auto& s : shapes) {
    for (const auto& [values, scales] : data) {
      E4m3Problem p;
      p.options.shape = {s.heads, s.rows, s.q};
      p.options.seed = s.heads * 1000 + s.rows * 10 + s.q;
      p.e4m3_weights = true;
      p.weights.values = values;
      p.weights.scales = scales;
      p.weights.seed = p.options.seed;
      problems.push_back(p);
    }
  }
  for (int rows : {1, 8, 33}) {
    E4m3Problem p;
    p.options.shape = {12, rows, 1};
    p.options.gates = Values::kUniformGates;
    p.e4m3_weights = false;
    problems.push_back(p);
  }
  return problems;
}

// Prints and records the share of `total` on which a wrong `kind` was rejected; returns it.
double Report(const char* kind, const char* name, const char* key, int64_t rejected, int64_t total,
              const char* unit) {
  const double share = static_cast<double>(rejected) / total;
  std::printf("  wrong %s %-52s rejected on %5.1f%% of %s\n", kind, name, 100 * share, unit);
  testing::Test::RecordProperty(std::string("rejected_percent_") + key,
                                std::to_string(100 * share));
  return share;
}

TEST(WrongTailsTest, TheE4m3SuitesDataRejectEveryWrongDequantizationAndQuantization) {
  constexpr int kDequantizations = std::size(kWrongDequantizations);
  constexpr int kQuantizations = std::size(kWrongQuantizations);
  std::array<int64_t, kDequantizations> dequantization_rejected{};
  std::array<int64_t, kQuantizations> quantization_rejected{};
  int64_t elements = 0, groups = 0;
  for (const E4m3Problem& p : E4m3SuiteProblems()) {
    const mla_tail::TailShape& shape = p.options.shape;
    SCOPED_TRACE(testing::Message() << "heads " << shape.heads << " rows " << shape.rows << " q "
                                    << shape.q << (p.e4m3_weights ? " e4m3" : " bf16")
                                    << " W_UV, data " << static_cast<int>(p.weights.values) << "/"
                                    << static_cast<int>(p.weights.scales));
    ReferenceInputs in = HostReferenceInputs(p.options);
    if (p.e4m3_weights) ApplyHostFp8Weights(shape.heads, p.weights, &in);
    std::array<int64_t, kDequantizations> problem_dequantization{};
    std::array<int64_t, kQuantizations> problem_quantization{};
    const std::vector<int> rows = SampleRows(p.options, 2);
    for (int h = 0; h < shape.heads; ++h) {
      // Each wrong dequantization of the head's W_UV, [variant][d][k].
      std::vector<double> wrong_w;
      if (p.e4m3_weights) {
        std::array<float, 4> scales{};
        for (int j = 0; j < 4; ++j) scales[j] = in.w_uv_scale(h, j);
        wrong_w.resize(size_t(kDequantizations) * 128 * 512);
        for (int i = 0; i < kDequantizations; ++i) {
          for (int d = 0; d < 128; ++d) {
            for (int k = 0; k < 512; ++k) {
              wrong_w[(size_t(i) * 128 + d) * 512 + k] =
                  kWrongDequantizations[i].w(in.w_uv_fp8(h, k, d), k / 128, scales);
            }
          }
        }
      }
      for (int t : rows) {
        std::vector<double> latent(512);
        for (int k = 0; k < 512; ++k) latent[k] = Bf16ToFloat(in.latent(t, h, k));
        std::array<uint16_t, 128> x{};
        std::array<float, 128> unrounded{};
        bool active = true;
        for (int d = 0; d < 128; ++d) {
          const ReferenceElement r = ReferenceOutput(in, t, h, d);
          active = r.active;
          x[d] = r.out;
          unrounded[d] = Bf16ToFloat(r.v) * r.s.nearest;
          if (!p.e4m3_weights || !r.active || Bf16IsNan(r.out)) continue;
          ++elements;
          std::string why;
          for (int i = 0; i < kDequantizations; ++i) {
            const double* w = &wrong_w[(size_t(i) * 128 + d) * 512];
            double acc = 0;
            for (int k = 0; k < 512; ++k) acc += latent[k] * w[k];
            const uint16_t wrong = FloatToBf16(Bf16ToFloat(DoubleToBf16(acc)) * r.s.nearest);
            problem_dequantization[i] += !OutputAgrees(r, wrong, true, &why);
          }
        }
        if (!active) continue;
        ++groups;
        const QuantizedHead right = QuantizeHead(x.data());
        for (int i = 0; i < kQuantizations; ++i) {
          problem_quantization[i] +=
              !SameQuantization(right, kWrongQuantizations[i].quantize(x, unrounded));
        }
      }
    }
    for (int i = 0; i < kDequantizations; ++i) {
      // The scale's forms are the same where every scale is a power of two (or zero).
      const bool distinguishable =
          p.e4m3_weights && (p.weights.scales == E4m3Scales::kOdd || i >= 3);
      if (distinguishable) {
        EXPECT_GT(problem_dequantization[i], 0)
            << "the e4m3 suite's check of this problem passes the wrong dequantization \""
            << kWrongDequantizations[i].name << "\"";
      }
      dequantization_rejected[i] += problem_dequantization[i];
    }
    for (int i = 0; i < kQuantizations; ++i) {
      if (kWrongQuantizations[i].every_problem) {
        EXPECT_GT(problem_quantization[i], 0)
            << "the e4m3 suite's check of this problem passes the wrong quantization \""
            << kWrongQuantizations[i].name << "\"";
      }
      quantization_rejected[i] += problem_quantization[i];
    }
  }
  std::printf("e4m3 W_UV: %lld active elements compared\n", static_cast<long long>(elements));
  for (int i = 0; i < kDequantizations; ++i) {
    Report("dequantization", kWrongDequantizations[i].name, kWrongDequantizations[i].key,
           dequantization_rejected[i], elements, "elements");
  }
  std::printf("e4m3 output: %lld active (row, head) groups compared\n",
              static_cast<long long>(groups));
  for (int i = 0; i < kQuantizations; ++i) {
    const double share =
        Report("quantization", kWrongQuantizations[i].name, kWrongQuantizations[i].key,
               quantization_rejected[i], groups, "groups");
    EXPECT_GE(share, 0.005) << kWrongQuantizations[i].name;
  }
}

}  // namespace
}  // namespace mla_tail_testing

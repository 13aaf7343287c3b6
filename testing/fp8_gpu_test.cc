// The e4m3 tail on the GPU: e4m3 W_UV with block scales and the e4m3 output, through every fused
// kernel forced and the rule, eagerly, in graph sets and as graph nodes, against the CPU
// reference (testing/support/reference.h, fp8.h); the BMM path's refusals and the validation
// errors, each with the output left untouched.

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ios>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/e4m3_bits.h"
#include "testing/support/fp8.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/late_inputs.h"
#include "testing/support/problem.h"
#include "testing/support/reference.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::FusedKernel;
using ::mla_tail::TailBuffers;
using ::mla_tail::TailPath;
using ::testing::HasSubstr;

// The fused kernels forced, then the rule.
std::vector<FusedKernel> KernelsAndRule() {
  std::vector<FusedKernel> kernels(std::begin(mla_tail::kFusedKernels),
                                   std::end(mla_tail::kFusedKernels));
  kernels.push_back(FusedKernel::kAuto);
  return kernels;
}

class Fp8GpuTest : public GpuStreamTest<> {
 protected:
  void SetUp() override {
    GpuStreamTest::SetUp();
    if (!StreamReady()) return;
    for (FusedKernel kernel : KernelsAndRule()) {
      mla_tail::TailOptions options;
      options.fused_kernel = kernel;
      options.max_rows = 1024;
      absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
          mla_tail::MlaTail::Create(0, options);
      ASSERT_TRUE(tail.ok()) << tail.status();
      tails_.push_back(*std::move(tail));
    }
  }

  std::unique_ptr<Problem> MakeProblem(const ProblemOptions& options) {
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  static std::unique_ptr<Fp8Weights> MakeWeights(int heads, const Fp8WeightOptions& options) {
    absl::StatusOr<std::unique_ptr<Fp8Weights>> w = Fp8Weights::Create(heads, options);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *std::move(w) : nullptr;
  }

  static std::unique_ptr<Fp8Output> MakeOutput(const mla_tail::TailShape& shape,
                                               const Fp8OutputOptions& options) {
    absl::StatusOr<std::unique_ptr<Fp8Output>> o = Fp8Output::Create(shape, options);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? *std::move(o) : nullptr;
  }
  static std::unique_ptr<Fp8Output> MakeOutput(const mla_tail::TailShape& shape, bool head_major) {
    return MakeOutput(shape, Scales(head_major));
  }

  // Scales row-major (head stride `spacing`) or head-major (row stride `spacing`).
  static Fp8OutputOptions Scales(bool head_major, int64_t spacing = 1) {
    Fp8OutputOptions options;
    options.head_major = head_major;
    options.scale_spacing = spacing;
    return options;
  }

  static std::string Name(const mla_tail::MlaTail& tail) {
    return mla_tail::FusedKernelName(tail.options().fused_kernel);
  }

  // 4 heads x `rows`, every other request inactive.
  static ProblemOptions FourHeads(int rows) {
    ProblemOptions options;
    options.shape = {4, rows, 1};
    options.inactive_every = 2;
    return options;
  }

  // The problem of `options` with e4m3 W_UV of `w_options`: every kernel and the rule into the
  // bf16 output (against the reference, bit for bit where `exact`, on `random_rows` sampled rows
  // besides the edges; then `also` on its bits) and into the e4m3 output of `scales` (the
  // quantization of each one's own bf16 output). With `finite_fill_pass`, where NaN results are
  // expected, each output is computed again over a finite fill (RerunBf16OverAFiniteFill, and
  // the e4m3 output over kFiniteFill), so that a NaN result left unstored shows.
  using Bf16Check =
      std::function<void(const mla_tail::MlaTail&, const Problem&, const std::vector<uint16_t>&)>;
  void ExpectBothOutputs(const ProblemOptions& options, const Fp8WeightOptions& w_options,
                         const Fp8OutputOptions& scales, bool exact = true, int random_rows = 4,
                         const Bf16Check& also = nullptr, bool finite_fill_pass = false) {
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    std::unique_ptr<Fp8Weights> weights = MakeWeights(options.shape.heads, w_options);
    ASSERT_NE(weights, nullptr);
    std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), scales);
    ASSERT_NE(out, nullptr);
    TailBuffers buffers = problem->buffers();
    weights->Apply(&buffers);
    ReferenceInputs in = problem->reference_inputs();
    weights->Apply(&in);
    for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
      const std::vector<uint16_t> bf16 =
          RunBf16(*tail, *problem, buffers, in, exact, problem->SampleRows(random_rows));
      if (also) also(*tail, *problem, bf16);
      RunE4m3(*tail, *problem, buffers, *out, bf16);
      if (finite_fill_pass) {
        RerunBf16OverAFiniteFill(*tail, *problem, buffers, bf16);
        RunE4m3(*tail, *problem, buffers, *out, bf16, -1, nullptr, kFiniteFill);
      }
    }
  }

  // Runs `tail` over `buffers` (their bf16 output poisoned first) and checks the bf16 output
  // against the reference `in`; returns the output's bits.
  // With `live_rows` >= 0 (the buffers' row count), rows past it must keep their NaN. With
  // `late`, the inputs are spoilt and the tail runs behind an upstream kernel that writes them
  // late (LateInputs).
  std::vector<uint16_t> RunBf16(mla_tail::MlaTail& tail, const Problem& problem,
                                const TailBuffers& buffers, const ReferenceInputs& in, bool exact,
                                const std::vector<int>& rows, int live_rows = -1,
                                const LateInputs* late = nullptr) {
    EXPECT_OK(problem.PoisonOutput(buffers.output, stream_));
    BehindLateWriter(problem, late);
    const absl::Status run = tail.Run(problem.shape(), buffers, stream_);
    EXPECT_TRUE(run.ok()) << Name(tail) << ": " << run;
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const absl::Status check = problem.Check(buffers.output, rows, exact, in, live_rows);
    EXPECT_TRUE(check.ok()) << Name(tail) << ": " << check;
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(buffers.output, problem.output_elements());
    return bits.ok() ? *std::move(bits) : std::vector<uint16_t>{};
  }

  // Runs `tail` over `buffers` again into their bf16 output filled with 0x5a5a (a finite value)
  // rather than NaN: where `first` (the output of a checked run over the NaN fill) holds NaN the
  // tail must have stored NaN, every other element of the batch must equal `first`, and every
  // element outside it (padding columns, guard rows) still hold 0x5a5a.
  void RerunBf16OverAFiniteFill(mla_tail::MlaTail& tail, const Problem& problem,
                                const TailBuffers& buffers, const std::vector<uint16_t>& first) {
    constexpr uint16_t kFill = 0x5a5a;
    const size_t elements = problem.output_elements();
    ASSERT_EQ(first.size(), elements) << Name(tail) << ": no first output";
    ASSERT_EQ(cudaMemsetAsync(buffers.output, 0x5a, elements * sizeof(uint16_t), stream_),
              cudaSuccess);
    const absl::Status run = tail.Run(problem.shape(), buffers, stream_);
    // Synchronised before a failure returns: a caller's later read must not race the fills.
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_TRUE(run.ok()) << Name(tail) << ": " << run;
    absl::StatusOr<std::vector<uint16_t>> got = DownloadBits(buffers.output, elements);
    ASSERT_TRUE(got.ok()) << got.status();
    const int64_t stride = buffers.output_row_stride;
    const int64_t width = int64_t{problem.shape().heads} * mla_tail::kValueDim;
    int mismatches = 0;
    for (size_t i = 0; i < elements; ++i) {
      const int64_t t = static_cast<int64_t>(i) / stride, c = static_cast<int64_t>(i) % stride;
      const bool in_batch = t < problem.shape().rows && c < width;
      const uint16_t g = (*got)[i];
      const bool ok = !in_batch ? g == kFill : Bf16IsNan(first[i]) ? Bf16IsNan(g) : g == first[i];
      if (!ok && ++mismatches <= 8) {
        ADD_FAILURE() << Name(tail) << ", over the finite fill: row " << t << " column " << c
                      << " holds 0x" << std::hex << g << ", over the NaN fill 0x" << first[i]
                      << std::dec << (in_batch ? "" : " (outside the batch: must keep the fill)");
      }
    }
    EXPECT_EQ(mismatches, 0) << Name(tail);
  }

  // Runs `tail` into the e4m3 output `out` (filled with `fill` first) and checks it bit for bit
  // against the quantization of `bf16` (an output of the problem's layout: the bf16 tail's result
  // for the same inputs). Over kFiniteFill a NaN code or scale must have been stored.
  void RunE4m3(mla_tail::MlaTail& tail, const Problem& problem, TailBuffers buffers,
               const Fp8Output& out, const std::vector<uint16_t>& bf16, int live_rows = -1,
               const LateInputs* late = nullptr, Fp8Fill fill = kNanFill) {
    ASSERT_EQ(bf16.size(), problem.output_elements()) << Name(tail) << ": no bf16 output";
    ASSERT_OK(out.Poison(stream_, fill));
    out.Apply(&buffers);
    BehindLateWriter(problem, late);
    const absl::Status run = tail.Run(problem.shape(), buffers, stream_);
    // Synchronised before a failure returns: a caller's later read must not race the fills.
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_TRUE(run.ok()) << Name(tail) << ": " << run;
    const int64_t stride = problem.buffers().output_row_stride;
    const absl::Status check =
        out.Check([&](int t, int column) { return bf16[t * stride + column]; }, live_rows);
    EXPECT_TRUE(check.ok()) << Name(tail) << (fill.value_byte == 0xff ? "" : ", finite fill")
                            << ": " << check;
  }

  static std::vector<int> NoRows() { return {}; }

  // With `late`: the problem's inputs spoilt, then the upstream kernel that writes them back late.
  void BehindLateWriter(const Problem& problem, const LateInputs* late) {
    if (late == nullptr) return;
    EXPECT_OK(late->Spoil(problem, stream_));
    EXPECT_EQ(late->LaunchWriter(problem, stream_), cudaSuccess);
  }

  std::vector<std::unique_ptr<mla_tail::MlaTail>> tails_;  // KernelsAndRule()'s order
};

// e4m3 W_UV, every kernel and the rule, bit for bit: integer-valued codes with power-of-two, odd
// and zero scales, and the edge codes (+-448, subnormals, +-0, the smallest normals), compact
// and as the V half of kv_b_proj (whose K half and K scales hold NaN), over shapes that reach
// each kernel's block sizes and edges. The same inputs with the e4m3 output: bit for bit the
// quantization of the bf16 output.
class Fp8WeightGridTest : public Fp8GpuTest,
                          public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(Fp8WeightGridTest, EveryKernelBitExact) {
  const auto [heads, q] = GetParam();
  struct Data {
    E4m3Values values;
    E4m3Scales scales;
  };
  const Data data[] = {{E4m3Values::kSmallIntegers, E4m3Scales::kPowersOfTwo},
                       {E4m3Values::kEdges, E4m3Scales::kPowersOfTwo},
                       {E4m3Values::kIntegersToThree, E4m3Scales::kOdd},
                       {E4m3Values::kEdges, E4m3Scales::kSomeZero}};
  const std::vector<int> row_counts =
      ForProfile({1, 2, 8, 9, 16, 17, 32, 64, 100, 129, 256}, {1, 9, 17, 64, 129});
  // Rounds count on from q = 1's, so that each (q, rows) keeps its data and layouts.
  int round = q == 1 ? 0 : static_cast<int>(row_counts.size());
  for (int rows : row_counts) {
    if (rows % q != 0) continue;
    // Each data set meets both W_UV layouts over four rounds, and both scale layouts.
    const int data_index = round % 4;
    const Data& d = data[data_index];
    const bool view = (round / 4) % 2 == 1;
    const bool head_major = round % 3 == 0;
    ++round;
    SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, " q ", q, " data ", data_index,
                              view ? " kv_b_proj view" : " compact",
                              head_major ? ", scales head-major" : ", scales row-major"));
    ProblemOptions options;            // the default data: latent sums that bf16 must round, gates
    options.shape = {heads, rows, q};  // over the whole range, inactive requests under NaN
    options.row_padding = 8;
    options.seed = heads * 1000 + rows * 10 + q;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    Fp8WeightOptions w_options;
    w_options.values = d.values;
    w_options.scales = d.scales;
    w_options.kv_b_proj_view = view;
    w_options.seed = options.seed;
    std::unique_ptr<Fp8Weights> weights = MakeWeights(heads, w_options);
    ASSERT_NE(weights, nullptr);
    std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), head_major);
    ASSERT_NE(out, nullptr);
    TailBuffers buffers = problem->buffers();
    weights->Apply(&buffers);
    ReferenceInputs in = problem->reference_inputs();
    weights->Apply(&in);
    // The first kernel against the reference; every other bit for bit equal to it.
    const std::vector<int> sample = problem->SampleRows(2);
    std::vector<uint16_t> first;
    for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
      const std::vector<uint16_t> bf16 =
          RunBf16(*tail, *problem, buffers, in, true, first.empty() ? sample : std::vector<int>{});
      if (first.empty()) first = bf16;
      EXPECT_TRUE(bf16 == first) << Name(*tail) << " differs from ColumnSplit";
      RunE4m3(*tail, *problem, buffers, *out, bf16);
    }
  }
}

// A case a (heads, q): the sanitizer runs take each case on its own, and the largest alone
// outlasted their time limit.
INSTANTIATE_TEST_SUITE_P(Heads, Fp8WeightGridTest,
                         ::testing::Combine(::testing::Values(1, 3, 12, 64, 128),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return absl::StrCat("H", std::get<0>(info.param), "_q",
                                               std::get<1>(info.param));
                         });

// The flagship checkpoints' tail, e4m3 W_UV without a gate (DeepSeek-V3/R1, Kimi-K2), and e4m3
// W_UV with a live row count (read after the wait, early, and with the rows past it readable),
// gated and not, W_UV compact, as kv_b_proj's V half, and with padded rows: every kernel and the
// rule, into the bf16 output (against the reference) and the e4m3 output (bit for bit the
// quantization of that bf16 output), with the edge codes and power-of-two scales and with codes
// -3..3 and odd scales. With the count, rows past it keep their NaN in both outputs and their
// scales.
TEST_F(Fp8GpuTest, UngatedAndCountedE4m3Tails) {
  absl::StatusOr<DeviceMemory> count = DeviceMemory::Allocate(sizeof(int32_t));
  ASSERT_TRUE(count.ok()) << count.status();
  for (int heads : ForProfile({12, 64}, {12})) {
    for (int rows : ForProfile({1, 9, 64, 200}, {9})) {
      for (bool gated : {false, true}) {
        SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, gated ? " gated" : " no gate"));
        ProblemOptions options;
        options.shape = {heads, rows, 1};
        options.gated = gated;
        options.seed = 500 + heads + rows;
        std::unique_ptr<Problem> problem = MakeProblem(options);
        ASSERT_NE(problem, nullptr);
        // Two data sets, each gated and not: the edge codes with power-of-two scales, and codes
        // -3..3 with odd scales (a scale rounded before the product shows); both exact in FP32.
        Fp8WeightOptions w_options;
        const bool odd_scales = (rows + (gated ? 1 : 0)) % 2 == 0;
        w_options.values = odd_scales ? E4m3Values::kIntegersToThree : E4m3Values::kEdges;
        w_options.scales = odd_scales ? E4m3Scales::kOdd : E4m3Scales::kPowersOfTwo;
        w_options.kv_b_proj_view = heads == 64;
        w_options.row_padding = rows % 3 == 1 ? 16 : 0;  // W_UV's rows 528 codes apart
        w_options.seed = options.seed;
        std::unique_ptr<Fp8Weights> weights = MakeWeights(heads, w_options);
        ASSERT_NE(weights, nullptr);
        // Each weight data set with both scale layouts, over the two head counts.
        std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), (rows + heads / 4) % 2 == 0);
        ASSERT_NE(out, nullptr);
        TailBuffers buffers = problem->buffers();
        weights->Apply(&buffers);
        ReferenceInputs in = problem->reference_inputs();
        weights->Apply(&in);
        const std::vector<int> sample = problem->SampleRows(4);
        // The count at about half the rows (all of one row), read after the wait.
        const int live = rows / 2 + 1;
        ASSERT_EQ(
            cudaMemcpyAsync(count->get(), &live, sizeof(live), cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        // The count read after the wait, read early, and with the rows past it readable: each
        // its own path through the kernels.
        std::array<TailBuffers, 3> counted;
        counted.fill(buffers);
        for (TailBuffers& c : counted) c.row_count = count->as<int32_t>();
        counted[1].row_count_before_upstream = true;
        counted[2].rows_past_count_readable = true;
        // The first kernel against the reference, every other bit for bit equal to it (the sums
        // are exact).
        std::vector<uint16_t> first, first_counted;
        for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
          if (!gated) {
            const std::vector<uint16_t> bf16 =
                RunBf16(*tail, *problem, buffers, in, true, first.empty() ? sample : NoRows());
            if (first.empty()) first = bf16;
            EXPECT_TRUE(bf16 == first) << Name(*tail) << " differs from ColumnSplit";
            RunE4m3(*tail, *problem, buffers, *out, bf16);
          }
          for (const TailBuffers& c : counted) {
            SCOPED_TRACE(c.row_count_before_upstream  ? "count read early"
                         : c.rows_past_count_readable ? "rows past the count readable"
                                                      : "count read after the wait");
            const std::vector<uint16_t> bf16 = RunBf16(
                *tail, *problem, c, in, true, first_counted.empty() ? sample : NoRows(), live);
            if (first_counted.empty()) first_counted = bf16;
            EXPECT_TRUE(bf16 == first_counted) << Name(*tail) << " differs from ColumnSplit";
            RunE4m3(*tail, *problem, c, *out, bf16, live);
          }
        }
      }
    }
  }
}

// The programmatic-dependency contract for the e4m3 forms, whose code before the wait is their
// own (e4m3 W_UV loaded there, and in the tiles dequantized): an upstream kernel triggers its
// dependents at once and writes latent, gate and lengths 50 us later, which until then hold NaN
// and zero lengths. Every kernel and the rule with e4m3 W_UV into the bf16 output, and with
// either W_UV into the e4m3 output, gated and not, at 64 rows and at 5-13 (the 8-row blocks):
// each output the reference's (the e4m3 output the quantization of the kernel's bf16 output).
TEST_F(Fp8GpuTest, E4m3FormsWaitForTheUpstreamInputs) {
  for (const auto& [heads, rows] :
       ForProfile<std::pair<int, int>>({{12, 64}, {64, 5}, {12, 13}}, {{12, 13}})) {
    for (bool gated : {true, false}) {
      SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, gated ? " gated" : " no gate"));
      ProblemOptions options;
      options.shape = {heads, rows, 1};
      options.inactive_every = 0;
      options.gated = gated;
      options.seed = 700 + heads + rows;
      std::unique_ptr<Problem> problem = MakeProblem(options);
      ASSERT_NE(problem, nullptr);
      std::unique_ptr<Fp8Weights> weights = MakeWeights(heads, {});
      ASSERT_NE(weights, nullptr);
      std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), false);
      ASSERT_NE(out, nullptr);
      absl::StatusOr<LateInputs> late = LateInputs::Save(*problem, stream_);
      ASSERT_TRUE(late.ok()) << late.status();
      for (bool e4m3_weights : {true, false}) {
        SCOPED_TRACE(e4m3_weights ? "e4m3 W_UV" : "bf16 W_UV");
        TailBuffers buffers = problem->buffers();
        ReferenceInputs in = problem->reference_inputs();
        if (e4m3_weights) {
          weights->Apply(&buffers);
          weights->Apply(&in);
        }
        for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
          const std::vector<uint16_t> bf16 =
              RunBf16(*tail, *problem, buffers, in, true, problem->SampleRows(), -1, &*late);
          RunE4m3(*tail, *problem, buffers, *out, bf16, -1, &*late);
        }
      }
    }
  }
}

// NaN codes in W_UV (0x7f and 0xff): their columns are NaN on active rows, and the e4m3 output
// of those (row, head) pairs is NaN with a NaN scale; inactive rows are zeros with scale 0,
// whatever their latent and gate hold. Both outputs again over a finite fill: the NaN results
// stored, not the NaN fill left.
TEST_F(Fp8GpuTest, NanCodesPropagateAndInactiveRowsAreZero) {
  for (int rows : ForProfile({3, 16, 64, 130}, {3, 64})) {
    SCOPED_TRACE(absl::StrCat("rows ", rows));
    Fp8WeightOptions w_options;
    w_options.nan_at = {{1, 5, 7}, {2, 300, 100}, {3, 511, 127}};
    ExpectBothOutputs(FourHeads(rows), w_options, Scales(/*head_major=*/false), /*exact=*/true,
                      /*random_rows=*/4, /*also=*/nullptr, /*finite_fill_pass=*/true);
  }
}

// A head whose four block scales are 0: its values are all zeros, so its e4m3 output is zeros
// with scale 0; the other heads are unaffected.
TEST_F(Fp8GpuTest, ZeroScalesGiveZeroHeads) {
  Fp8WeightOptions w_options;
  w_options.scales = E4m3Scales::kZeroHead;
  ProblemOptions options;
  options.shape = {3, 24, 1};
  options.inactive_every = 0;
  ExpectBothOutputs(
      options, w_options, Scales(/*head_major=*/true), /*exact=*/true, /*random_rows=*/4,
      [](const mla_tail::MlaTail& tail, const Problem& problem, const std::vector<uint16_t>& bf16) {
        for (int t = 0; t < 24; ++t) {
          for (int d = 0; d < 128; ++d) {
            const uint16_t v = bf16[t * problem.buffers().output_row_stride + d];
            ASSERT_TRUE(v == 0x0000 || v == 0x8000)
                << Name(tail) << " row " << t << " column " << d;
          }
        }
      });
}

// A NaN or infinite block scale: the head's dequantized W_UV holds NaN (NaN x code, and 0 x inf
// for its zero codes), so its active rows are NaN with a NaN e4m3 scale, as the formula gives;
// the other heads and the inactive rows are unaffected. Both outputs again over a finite fill:
// the NaN results stored, not the NaN fill left.
TEST_F(Fp8GpuTest, NonFiniteBlockScalesPropagate) {
  for (E4m3Scales scales : {E4m3Scales::kNanBlock, E4m3Scales::kInfBlock}) {
    for (int rows : ForProfile({3, 64}, {3})) {
      SCOPED_TRACE(absl::StrCat(scales == E4m3Scales::kNanBlock ? "NaN" : "inf", " rows ", rows));
      Fp8WeightOptions w_options;
      w_options.scales = scales;
      ExpectBothOutputs(FourHeads(rows), w_options, Scales(/*head_major=*/rows % 2 == 1),
                        /*exact=*/true, /*random_rows=*/4, /*also=*/nullptr,
                        /*finite_fill_pass=*/true);
    }
  }
}

// Every finite code with odd scales and random latent, whose sums FP32 cannot hold exactly: v
// within the contract's accumulation bound (2^-13 of the sum of the products' magnitudes, which
// at cancellation spans many ulps of v); the e4m3 output still bit for bit the quantization of
// each kernel's own bf16 output.
TEST_F(Fp8GpuTest, UniformCodesWithinTheAccumulationBound) {
  for (int heads : {12, 128}) {
    for (int rows : ForProfile({1, 16, 64, 256}, {1, 64})) {
      SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows));
      ProblemOptions options;
      options.shape = {heads, rows, 1};
      options.data = Values::kUniform;
      options.gates = Values::kUniformGates;
      options.seed = 31 + heads + rows;
      Fp8WeightOptions w_options;
      w_options.values = E4m3Values::kUniform;
      w_options.scales = E4m3Scales::kOdd;
      w_options.kv_b_proj_view = true;
      ExpectBothOutputs(options, w_options, Scales(/*head_major=*/false), /*exact=*/false,
                        /*random_rows=*/2);
    }
  }
}

// bf16 W_UV with the e4m3 output: the quantization of the reference's own bf16 output (exact
// data), for every kernel.
TEST_F(Fp8GpuTest, Bf16WeightsWithE4m3Output) {
  for (int rows : ForProfile({1, 8, 33, 128}, {1, 33})) {
    SCOPED_TRACE(absl::StrCat("rows ", rows));
    ProblemOptions options;
    options.shape = {12, rows, 1};
    options.gates = Values::kUniformGates;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), rows % 2 == 1);
    ASSERT_NE(out, nullptr);
    const ReferenceInputs in = problem->reference_inputs();
    for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
      RunE4m3(*tail, *problem, problem->buffers(), *out,
              RunBf16(*tail, *problem, problem->buffers(), in, true, problem->SampleRows()));
    }
  }
}

// Graph sets with e4m3 buffers: replays equal the eager tail bit for bit; a pointer update is a
// node update, and a change of weight or output type re-captures. Into the e4m3 output each
// bucket's replay writes its rows alone (the values and scales of the rows past it untouched);
// pointing the set at a second e4m3 output (head-major scales) is a node update, after which the
// first output stays untouched.
TEST_F(Fp8GpuTest, GraphSetReplaysAndUpdates) {
  const int heads = 12;
  const std::vector<int> buckets = {1, 16, 64};
  ProblemOptions options;
  options.shape = {heads, 64, 1};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<Fp8Weights> a = MakeWeights(heads, {});
  Fp8WeightOptions b_options;
  b_options.kv_b_proj_view = true;
  b_options.values = E4m3Values::kEdges;
  std::unique_ptr<Fp8Weights> b = MakeWeights(heads, b_options);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), false);
  std::unique_ptr<Fp8Output> head_major_out = MakeOutput(problem->shape(), true);
  ASSERT_TRUE(out != nullptr && head_major_out != nullptr);

  mla_tail::GraphSetOptions set_options;
  set_options.heads = heads;
  set_options.layers = 1;
  set_options.buckets = buckets;
  absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
      mla_tail::TailGraphSet::Create(0, set_options);
  ASSERT_TRUE(set.ok()) << set.status();
  mla_tail::MlaTail& eager = *tails_.back();  // the rule, as the set
  const int64_t stride = problem->buffers().output_row_stride;

  // Steps 0-2 into the bf16 output; 3 into the e4m3 output (another kernel: re-captured); 4 into
  // a second e4m3 output (other pointers and scale strides, the same kernel: a node update).
  for (int step = 0; step < 5; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    TailBuffers buffers = problem->buffers();
    const Fp8Weights& w = step % 2 == 0 ? *a : *b;
    w.Apply(&buffers);
    ReferenceInputs in = problem->reference_inputs();
    w.Apply(&in);
    const Fp8Output* e4m3 = step == 3 ? out.get() : step == 4 ? head_major_out.get() : nullptr;
    const Fp8Output* other = step == 3 ? head_major_out.get() : out.get();
    std::vector<uint16_t> bf16;
    if (e4m3 != nullptr) {
      // The eager bf16 tail of the same inputs (the batch of the largest bucket): what each
      // replay's e4m3 output is the quantization of, on the bucket's rows.
      bf16 = RunBf16(eager, *problem, buffers, in, true, problem->SampleRows());
      ASSERT_EQ(bf16.size(), problem->output_elements());
      e4m3->Apply(&buffers);
    }
    ASSERT_OK((*set)->SetLayer(0, buffers));
    for (int rows : buckets) {
      SCOPED_TRACE(absl::StrCat("bucket ", rows));
      const int64_t captured = (*set)->stats().graphs_captured;
      const int64_t updates = (*set)->stats().node_updates;
      if (e4m3 != nullptr) {
        ASSERT_OK(e4m3->Poison(stream_));
        ASSERT_OK(other->Poison(stream_, kFiniteFill));
      } else {
        ASSERT_OK(problem->PoisonOutput(buffers.output, stream_));
      }
      ASSERT_OK((*set)->Replay(0, rows, stream_));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      if (step == 1 || step == 2 || step == 4) {  // other pointers, the same types: a node update
        EXPECT_EQ((*set)->stats().graphs_captured, captured);
        EXPECT_EQ((*set)->stats().node_updates, updates + 1);
      }
      if (step == 3) {  // the e4m3 output: another kernel, so a capture
        EXPECT_EQ((*set)->stats().graphs_captured, captured + 1);
      }
      // A smaller bucket writes its rows alone: the rest keep the poison.
      if (e4m3 == nullptr) {
        ASSERT_OK(problem->Check(buffers.output, problem->SampleRows(), true, in, rows));
      } else {
        EXPECT_OK(e4m3->Check([&](int t, int column) { return bf16[t * stride + column]; }, rows));
        EXPECT_OK(other->CheckUntouched());
      }
    }
  }
}

// Graph nodes with e4m3 buffers: a node added for e4m3 W_UV runs it, updates to other e4m3
// pointers apply, with and without a gate (the node's kernel switched in place), and buffers of
// another type are refused with nothing changed.
TEST_F(Fp8GpuTest, GraphNodesTakeE4m3AndRefuseATypeChange) {
  ProblemOptions options;
  options.shape = {12, 16, 1};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<Fp8Weights> a = MakeWeights(12, {});
  Fp8WeightOptions b_options;
  b_options.kv_b_proj_view = true;
  b_options.scales = E4m3Scales::kOdd;
  std::unique_ptr<Fp8Weights> b = MakeWeights(12, b_options);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  TailBuffers buffers = problem->buffers();
  a->Apply(&buffers);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  absl::StatusOr<mla_tail::TailNode> node =
      mla_tail::AddTailNode(*tails_.back(), graph, {}, problem->shape(), buffers);
  ASSERT_TRUE(node.ok()) << node.status();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // Other e4m3 weights, then without a gate and with one again (the node's kernel switched in
  // place each time).
  const struct {
    const Fp8Weights* weights;
    bool gated;
  } updates[] = {
      {a.get(), true}, {b.get(), true}, {b.get(), false}, {a.get(), false}, {a.get(), true}};
  for (const auto& update : updates) {
    SCOPED_TRACE(update.gated ? "gated" : "no gate");
    TailBuffers next = problem->buffers();
    update.weights->Apply(&next);
    ReferenceInputs in = problem->reference_inputs();
    update.weights->Apply(&in);
    if (!update.gated) {
      next.gate = nullptr;
      in.gate = nullptr;
    }
    ASSERT_OK(node->Update(exec, next));
    ASSERT_OK(problem->PoisonOutput(next.output, stream_));
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem->Check(next.output, problem->SampleRows(), true, in));
  }
  const absl::Status refused = node->Update(exec, problem->buffers());  // bf16 W_UV
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("type"));
  // The e4m3 output is another kernel as well: refused.
  std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), false);
  ASSERT_NE(out, nullptr);
  TailBuffers e4m3_output = problem->buffers();
  a->Apply(&e4m3_output);
  out->Apply(&e4m3_output);
  const absl::Status output_refused = node->Update(exec, e4m3_output);
  EXPECT_EQ(output_refused.code(), absl::StatusCode::kInvalidArgument) << output_refused;
  EXPECT_THAT(std::string(output_refused.message()), HasSubstr("type"));
  // Neither refusal changed the node: it runs the last buffers (weights a, gated).
  TailBuffers last = problem->buffers();
  a->Apply(&last);
  ReferenceInputs in = problem->reference_inputs();
  a->Apply(&in);
  ASSERT_OK(problem->PoisonOutput(last.output, stream_));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(last.output, problem->SampleRows(), true, in));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Graph nodes into the e4m3 output, for every kernel and the rule: AddTailNode with e4m3 W_UV and
// the e4m3 output; TailNode::Update to a second e4m3 output (head-major scales with gaps), then
// without a gate (the node's kernel switched in place); bf16 output buffers refused, the node
// unchanged; UpdateGraph for a later instantiation; RecordTailNode into a capture, and its
// handle's update. Each launch's output bit for bit the quantization of the kernel's own eager
// bf16 output of the same inputs, the other e4m3 output untouched.
TEST_F(Fp8GpuTest, GraphNodesWriteTheE4m3Output) {
  ProblemOptions options;
  options.shape = {12, 16, 1};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<Fp8Weights> weights = MakeWeights(12, {});
  ASSERT_NE(weights, nullptr);
  std::unique_ptr<Fp8Output> row_major = MakeOutput(problem->shape(), false);
  std::unique_ptr<Fp8Output> head_major =
      MakeOutput(problem->shape(), Scales(/*head_major=*/true, /*spacing=*/2));
  ASSERT_TRUE(row_major != nullptr && head_major != nullptr);
  const mla_tail::TailShape shape = problem->shape();
  const int64_t stride = problem->buffers().output_row_stride;
  TailBuffers gated = problem->buffers();
  weights->Apply(&gated);
  TailBuffers ungated = gated;
  ungated.gate = nullptr;
  ReferenceInputs in = problem->reference_inputs();
  weights->Apply(&in);
  ReferenceInputs ungated_in = in;
  ungated_in.gate = nullptr;
  auto into = [](TailBuffers b, const Fp8Output& o) {
    o.Apply(&b);
    return b;
  };

  for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
    SCOPED_TRACE(Name(*tail));
    const std::vector<uint16_t> gated_bf16 =
        RunBf16(*tail, *problem, gated, in, true, problem->SampleRows());
    const std::vector<uint16_t> ungated_bf16 =
        RunBf16(*tail, *problem, ungated, ungated_in, true, problem->SampleRows());
    ASSERT_EQ(gated_bf16.size(), problem->output_elements());
    ASSERT_EQ(ungated_bf16.size(), problem->output_elements());
    // Launches `exec` over both outputs freshly filled: `target` must hold the quantization of
    // `bf16`, the other output (filled with the finite byte) nothing.
    auto launch = [&](cudaGraphExec_t exec, const Fp8Output& target,
                      const std::vector<uint16_t>& bf16, const char* what) {
      SCOPED_TRACE(what);
      const Fp8Output& other = &target == row_major.get() ? *head_major : *row_major;
      ASSERT_OK(target.Poison(stream_));
      ASSERT_OK(other.Poison(stream_, kFiniteFill));
      ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_OK(target.Check([&](int t, int column) { return bf16[t * stride + column]; }));
      EXPECT_OK(other.CheckUntouched());
    };

    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
    absl::StatusOr<mla_tail::TailNode> node =
        mla_tail::AddTailNode(*tail, graph, {}, shape, into(gated, *row_major));
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_EQ(node->kernel(), tail->FusedKernelFor(shape, mla_tail::WeightType::kE4m3,
                                                   mla_tail::OutputType::kE4m3));
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    launch(exec, *row_major, gated_bf16, "as added");
    ASSERT_OK(node->Update(exec, into(gated, *head_major)));
    launch(exec, *head_major, gated_bf16, "updated to the head-major output");
    ASSERT_OK(node->Update(exec, into(ungated, *head_major)));
    launch(exec, *head_major, ungated_bf16, "updated to no gate");
    // bf16 output buffers: another kernel, refused; the node runs what it had.
    const absl::Status refused = node->Update(exec, ungated);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("type"));
    launch(exec, *head_major, ungated_bf16, "after the refused update");
    // UpdateGraph: a later instantiation holds the new buffers (with the gate again).
    ASSERT_OK(node->UpdateGraph(into(gated, *row_major)));
    cudaGraphExec_t fresh = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&fresh, graph, 0), cudaSuccess);
    launch(fresh, *row_major, gated_bf16, "instantiated after UpdateGraph");
    cudaGraphExecDestroy(fresh);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    // RecordTailNode into a capture of the test's own, and its handle's update of that graph.
    cudaGraph_t captured = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    absl::StatusOr<mla_tail::TailNode> recorded =
        mla_tail::RecordTailNode(*tail, stream_, shape, into(ungated, *row_major));
    ASSERT_EQ(cudaStreamEndCapture(stream_, &captured), cudaSuccess);
    ASSERT_TRUE(recorded.ok()) << recorded.status();
    cudaGraphExec_t recorded_exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&recorded_exec, captured, 0), cudaSuccess);
    launch(recorded_exec, *row_major, ungated_bf16, "recorded");
    ASSERT_OK(recorded->Update(recorded_exec, into(gated, *head_major)));
    launch(recorded_exec, *head_major, gated_bf16, "recorded, then updated");
    cudaGraphExecDestroy(recorded_exec);
    cudaGraphDestroy(captured);
  }
}

// The e4m3 output's edge rules (docs/spec.md) through every kernel and the rule, with e4m3 and
// bf16 W_UV, gated and not, at (row, head)s whose gates are +inf (sigmoid 1: out = v) and whose
// latent is zero but at k = 0:
//   - a bf16 2^-126 there: v = 2^-126 * w, every product normal, amax at most 5 * 2^-126, where
//     448 / amax overflows FP32: the values are zeros (0x00, negative ones included) and the
//     scale is amax / 448, a subnormal FP32 (not 0);
//   - +-the largest bf16 there: v = +-inf where |w| > 1: the scale is +inf, the infinities NaN
//     codes, the finite values zeros (0x80 for negative ones).
// The rest of the batch is the default data. Each e4m3 output is checked against the
// quantization of the kernel's own bf16 output, against these rules read directly, and again
// over a finite fill (the NaN codes stored, not the NaN fill left).
TEST_F(Fp8GpuTest, TinyAndInfiniteAmaxThroughEveryKernel) {
  struct Special {
    int t, h;
    uint16_t latent;  // at k = 0
    bool infinite;    // else tiny
  };
  for (int rows : ForProfile({9, 70}, {9})) {
    SCOPED_TRACE(absl::StrCat("rows ", rows));
    ProblemOptions options;
    options.shape = {4, rows, 1};
    options.inactive_every = 0;
    options.seed = 900 + rows;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    // Heads 0 and 3: e4m3 block 0 scales 1 and 2 (kPowersOfTwo), so w is 0 or at least 1 in
    // magnitude (products with 2^-126 stay normal); at head 0 |w| = 2 gives +-inf (the largest
    // bf16 is about 2^128 - 2^120), |w| = 1 the largest finite value. bf16 W_UV holds integers.
    const Special specials[] = {{0, 0, 0x0080, false},
                                {1, 3, 0x0080, false},
                                {rows - 1, 0, 0x7f7f, true},
                                {rows - 2, 0, 0xff7f, true}};
    const TailBuffers base = problem->buffers();
    const std::vector<uint16_t> plus_inf_gates(mla_tail::kValueDim, 0x7f80);
    for (const Special& s : specials) {
      std::vector<uint16_t> latent(mla_tail::kLatentDim, 0);
      latent[0] = s.latent;
      auto* latent_at = const_cast<mla_tail::bf16*>(base.latent) + s.t * base.latent_row_stride +
                        s.h * mla_tail::kLatentDim;
      auto* gate_at = const_cast<mla_tail::bf16*>(base.gate) + s.t * base.gate_row_stride +
                      s.h * mla_tail::kValueDim;
      ASSERT_EQ(cudaMemcpyAsync(latent_at, latent.data(), latent.size() * sizeof(uint16_t),
                                cudaMemcpyHostToDevice, stream_),
                cudaSuccess);
      ASSERT_EQ(
          cudaMemcpyAsync(gate_at, plus_inf_gates.data(), plus_inf_gates.size() * sizeof(uint16_t),
                          cudaMemcpyHostToDevice, stream_),
          cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    // The reference reads the same inputs.
    const ReferenceInputs problem_in = problem->reference_inputs();
    auto special_at = [specials](int t, int h) -> const Special* {
      for (const Special& s : specials) {
        if (s.t == t && s.h == h) return &s;
      }
      return nullptr;
    };
    ReferenceInputs base_in = problem_in;
    base_in.latent = [special_at, latent = problem_in.latent](int t, int h, int k) {
      const Special* s = special_at(t, h);
      return s == nullptr ? latent(t, h, k) : k == 0 ? s->latent : uint16_t{0};
    };
    base_in.gate = [special_at, gate = problem_in.gate](int t, int column) {
      return special_at(t, column / mla_tail::kValueDim) != nullptr ? uint16_t{0x7f80}
                                                                    : gate(t, column);
    };
    std::vector<int> sample = problem->SampleRows();
    for (const Special& s : specials) sample.push_back(s.t);
    std::unique_ptr<Fp8Weights> weights = MakeWeights(4, {});
    ASSERT_NE(weights, nullptr);
    std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), rows % 2 == 1);
    ASSERT_NE(out, nullptr);
    const int64_t stride = base.output_row_stride;

    for (bool e4m3_weights : {true, false}) {
      for (bool gated : {true, false}) {
        SCOPED_TRACE(absl::StrCat(e4m3_weights ? "e4m3 W_UV" : "bf16 W_UV",
                                  gated ? ", gated" : ", no gate"));
        TailBuffers buffers = base;
        ReferenceInputs in = base_in;
        if (e4m3_weights) {
          weights->Apply(&buffers);
          weights->Apply(&in);
        }
        if (!gated) {
          buffers.gate = nullptr;
          in.gate = nullptr;
        }
        // The data make the cases meant: checked on the reference's bf16 output first.
        for (const Special& s : specials) {
          SCOPED_TRACE(absl::StrCat("row ", s.t, " head ", s.h));
          uint16_t x[mla_tail::kValueDim];
          float amax = 0;
          bool negative = false, infinite = false, negative_finite = false;
          for (int d = 0; d < mla_tail::kValueDim; ++d) {
            x[d] = ReferenceOutput(in, s.t, s.h, d).out;
            const float f = Bf16ToFloat(x[d]);
            amax = std::max(amax, std::fabs(f));
            negative = negative || f < 0;
            infinite = infinite || std::isinf(f);
            negative_finite = negative_finite || (std::isfinite(f) && f < 0);
            if (!s.infinite) {
              ASSERT_TRUE(f == 0 || std::fabs(f) >= 0x1p-126f) << "a subnormal product, d " << d;
            }
          }
          const QuantizedHead want = QuantizeHead(x);
          if (s.infinite) {
            ASSERT_TRUE(infinite && negative_finite);
            ASSERT_EQ(want.scale, std::numeric_limits<float>::infinity());
          } else {
            ASSERT_TRUE(negative);
            ASSERT_TRUE(std::isinf(kE4m3Max / amax)) << amax;
            ASSERT_GT(want.scale, 0.0f);
            ASSERT_LT(want.scale, 0x1p-126f);  // subnormal
            for (uint8_t y : want.values) ASSERT_EQ(y, 0x00);
          }
        }
        std::vector<uint16_t> first;
        for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
          const std::vector<uint16_t> bf16 = RunBf16(*tail, *problem, buffers, in, true, sample);
          ASSERT_EQ(bf16.size(), problem->output_elements()) << Name(*tail);
          if (first.empty()) first = bf16;
          EXPECT_TRUE(bf16 == first) << Name(*tail) << " differs from ColumnSplit";
          for (Fp8Fill fill : {kNanFill, kFiniteFill}) {
            SCOPED_TRACE(fill.value_byte == 0xff ? "NaN fill" : "finite fill");
            RunE4m3(*tail, *problem, buffers, *out, bf16, -1, nullptr, fill);
            absl::StatusOr<Fp8OutputBits> bits = out->Read();
            ASSERT_TRUE(bits.ok()) << bits.status();
            for (const Special& s : specials) {
              SCOPED_TRACE(absl::StrCat(Name(*tail), " row ", s.t, " head ", s.h));
              float amax = 0;
              for (int d = 0; d < mla_tail::kValueDim; ++d) {
                amax = std::max(
                    amax,
                    std::fabs(Bf16ToFloat(bf16[s.t * stride + s.h * mla_tail::kValueDim + d])));
              }
              const uint32_t scale = bits->scale(s.t, s.h);
              if (s.infinite) {
                EXPECT_EQ(scale, 0x7f800000u);
              } else {
                EXPECT_EQ(scale, FloatBits(amax / kE4m3Max));
                EXPECT_NE(scale, 0u);
              }
              for (int d = 0; d < mla_tail::kValueDim; ++d) {
                const int column = s.h * mla_tail::kValueDim + d;
                const float x = Bf16ToFloat(bf16[s.t * stride + column]);
                const uint8_t y = bits->value(s.t, column);
                if (std::isinf(x)) {
                  EXPECT_TRUE(E4m3IsNan(y)) << "column " << column << ": 0x" << std::hex << int{y};
                } else {
                  const uint8_t zero = s.infinite && std::signbit(x) ? 0x80 : 0x00;
                  EXPECT_EQ(y, zero) << "column " << column << ", value " << x;
                }
              }
            }
          }
        }
      }
    }
  }
}

// Output scales with gaps: row-major with a head stride of 3, head-major with a row stride of 2.
// Every kernel and the rule write each (row, head)'s scale at its place and leave the entries
// between untouched (Fp8Output::Check).
TEST_F(Fp8GpuTest, ScaleStridesLeaveTheirGapsUntouched) {
  for (bool head_major : {false, true}) {
    SCOPED_TRACE(head_major ? "head-major, row stride 2" : "row-major, head stride 3");
    ProblemOptions options;
    options.shape = {12, 33, 1};
    options.seed = head_major ? 41 : 42;
    ExpectBothOutputs(options, {}, Scales(head_major, head_major ? 2 : 3));
  }
}

// The BMM path takes neither e4m3 W_UV nor the e4m3 output: Unimplemented from Run, PrepareBmm
// and a graph set on that path, with nothing written.
TEST_F(Fp8GpuTest, BmmPathRefusesE4m3) {
  ProblemOptions options;
  options.shape = {4, 16, 1};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<Fp8Weights> weights = MakeWeights(4, {});
  std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), false);
  ASSERT_TRUE(weights != nullptr && out != nullptr);
  TailBuffers fp8_weights = problem->buffers();
  weights->Apply(&fp8_weights);
  TailBuffers fp8_output = problem->buffers();
  out->Apply(&fp8_output);
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, {});
  ASSERT_TRUE(tail.ok()) << tail.status();
  for (const TailBuffers& b : {fp8_weights, fp8_output}) {
    ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
    const absl::Status run = (*tail)->Run(problem->shape(), b, stream_, TailPath::kBmm);
    EXPECT_EQ(run.code(), absl::StatusCode::kUnimplemented) << run;
    EXPECT_THAT(std::string(run.message()), HasSubstr("BMM path"));
    EXPECT_EQ((*tail)->PrepareBmm(problem->shape(), b).code(), absl::StatusCode::kUnimplemented);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(problem->buffers().output, problem->output_elements());
    ASSERT_TRUE(bits.ok());
    for (uint16_t bit : *bits) ASSERT_EQ(bit, 0xffff) << "the output was written";
    ASSERT_OK(out->CheckUntouched());
  }
  EXPECT_EQ((*tail)->scratch_bytes(), 0u);
  mla_tail::GraphSetOptions set_options;
  set_options.heads = 4;
  set_options.layers = 1;
  set_options.buckets = {16};
  set_options.path = TailPath::kBmm;
  absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
      mla_tail::TailGraphSet::Create(0, set_options);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->SetLayer(0, fp8_weights).code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ((*set)->SetLayer(0, fp8_output).code(), absl::StatusCode::kUnimplemented);
}

// Bad e4m3 arguments: InvalidArgument naming the argument, nothing launched or written.
TEST_F(Fp8GpuTest, ValidationErrorsLaunchNothing) {
  ProblemOptions options;
  options.shape = {12, 32, 2};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<Fp8Weights> weights = MakeWeights(12, {});
  std::unique_ptr<Fp8Output> out = MakeOutput(problem->shape(), false);
  ASSERT_TRUE(weights != nullptr && out != nullptr);
  TailBuffers good = problem->buffers();
  weights->Apply(&good);
  out->Apply(&good);
  const std::pair<const char*, void (*)(TailBuffers&)> cases[] = {
      {"w_uv_scale is null", [](TailBuffers& b) { b.w_uv_scale = nullptr; }},
      {"w_uv_scale = ", [](TailBuffers& b) { b.w_uv_scale += 1; }},
      {"w_uv_scale_head_stride = 2", [](TailBuffers& b) { b.w_uv_scale_head_stride = 2; }},
      {"w_uv_fp8 = ", [](TailBuffers& b) { b.w_uv_fp8 += 8; }},
      {"w_uv and w_uv_fp8 are both set",
       [](TailBuffers& b) { b.w_uv = reinterpret_cast<const mla_tail::bf16*>(b.w_uv_fp8); }},
      {"output_scale is null", [](TailBuffers& b) { b.output_scale = nullptr; }},
      {"output_fp8 = ", [](TailBuffers& b) { b.output_fp8 += 4; }},
      {"output_row_stride = 1544 is not a multiple of 16",
       [](TailBuffers& b) { b.output_row_stride = 1544; }},
      {"make scales overlap", [](TailBuffers& b) { b.output_scale_row_stride = 4; }},
  };
  for (const std::unique_ptr<mla_tail::MlaTail>& tail : tails_) {
    for (const auto& [message, mutate] : cases) {
      SCOPED_TRACE(message);
      ASSERT_OK(out->Poison(stream_));
      TailBuffers b = good;
      mutate(b);
      const absl::Status status = tail->Run(problem->shape(), b, stream_);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr(message));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(out->CheckUntouched());
    }
  }
}

}  // namespace
}  // namespace mla_tail_testing

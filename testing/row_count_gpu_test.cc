// The live row count (TailBuffers::row_count) and the tail without a gate, on every path: every
// fused kernel forced, the BMM path, graph sets and nodes. Padding rows hold what runtimes put
// there (NaN latent and gate, lengths 1 as SGLang pads them); the output's rows past the live
// count are NaN before the call and must stay so; the sampled rows below it equal the CPU
// reference bit for bit, and every row below it equals the same kernel's output without a count.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/late_inputs.h"
#include "testing/support/problem.h"
#include "testing/support/reference.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::FusedKernel;
using ::mla_tail::GraphSetOptions;
using ::mla_tail::TailBuffers;
using ::mla_tail::TailGraphSet;
using ::mla_tail::TailNode;
using ::mla_tail::TailPath;
using ::testing::HasSubstr;

class RowCountGpuTest : public GpuStreamTest<> {
 protected:
  void SetUp() override {
    GpuStreamTest::SetUp();
    if (!StreamReady()) return;
    absl::StatusOr<DeviceMemory> count = DeviceMemory::Allocate(sizeof(int32_t));
    ASSERT_TRUE(count.ok()) << count.status();
    count_ = *std::move(count);
  }

  std::unique_ptr<Problem> MakeProblem(int heads, int rows, uint64_t seed, bool gated = true,
                                       int q = 1) {
    ProblemOptions options;
    options.shape = {heads, rows, q};
    options.seed = seed;
    options.gated = gated;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  static std::unique_ptr<mla_tail::MlaTail> MakeTail(FusedKernel kernel) {
    mla_tail::TailOptions options;
    options.max_rows = 1024;
    options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    EXPECT_TRUE(tail.ok()) << tail.status();
    return tail.ok() ? *std::move(tail) : nullptr;
  }

  // Writes the live row count (in stream order, then waits).
  void SetCount(int n) {
    ASSERT_EQ(cudaMemcpyAsync(count_.get(), &n, sizeof(n), cudaMemcpyHostToDevice, stream_),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }

  // Rows [from, B) become padding as a runtime leaves it: NaN latent and gate, and length 1 for
  // the requests wholly past `from` (the request `from` falls in keeps its length: its rows
  // below `from` are live).
  void PadFrom(Problem& problem, int from) {
    const TailBuffers b = problem.buffers();
    const int rows = problem.shape().rows;
    if (from >= rows) return;
    from = std::max(from, 0);
    const size_t n = rows - from;
    ASSERT_EQ(cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.latent) + from * b.latent_row_stride,
                              0xff, n * b.latent_row_stride * 2, stream_),
              cudaSuccess);
    if (b.gate != nullptr) {
      ASSERT_EQ(cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.gate) + from * b.gate_row_stride,
                                0xff, n * b.gate_row_stride * 2, stream_),
                cudaSuccess);
    }
    std::vector<int32_t> lengths = problem.lengths();
    const int q = problem.shape().q;
    for (int r = (from + q - 1) / q; r < rows / q; ++r) lengths[r] = 1;
    ASSERT_OK(problem.SetLengths(lengths, stream_));
  }

  // A run of the same kernel as a counted run's, without a count, on the buffers given (the
  // problem's, with an output of their own).
  using UncountedRun = std::function<absl::Status(const TailBuffers&)>;

  // An eager run of `tail` on `path` at `shape`: the kernel that a counted run of that tail, path
  // and shape takes, or that a graph or node of that shape holds (the same rule).
  UncountedRun Uncounted(mla_tail::MlaTail& tail, TailPath path, const mla_tail::TailShape& shape) {
    return [this, &tail, path, shape](const TailBuffers& b) {
      return tail.Run(shape, b, stream_, path);
    };
  }

  // Checks the problem's output after a counted run with `live` rows live (the count clamped to
  // [0, B]). Problem::Check: the sampled rows below the count, and the last q below it (with q > 1
  // the request the count splits, whose live rows keep its length), equal the reference; every
  // row below it was written (no NaN; +0.0 where its request is inactive); every row past it
  // still holds its NaN. Then every row below the count equals, bit for bit, the same kernel's
  // output without a count (`uncounted`): the sample ties both runs to the reference, and a live
  // row the count mishandles outside the sample differs. The data's sums are exact in FP32, so
  // the contract leaves no freedom to either run. On each active row below the count, one
  // element whose reference cannot be ±0 is checked against the reference: no live active row is
  // left all ±0, by either run.
  void CheckLiveRows(const Problem& problem, int live, const UncountedRun& uncounted) {
    const int q = problem.shape().q;
    std::vector<int> sample = problem.SampleRows(8);
    for (int t = std::max(0, live - q); t < live; ++t) sample.push_back(t);
    std::sort(sample.begin(), sample.end());
    sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
    ASSERT_OK(problem.Check(problem.buffers().output, sample, true, live));
    // The sanitizers' runs (the sanitizer profile) look for memory errors, not wrong values: the
    // second run would double their time, and the plain run compares.
    if (live <= 0 || SanitizerProfile()) return;
    absl::StatusOr<DeviceMemory> other = problem.NewOutput(stream_);
    ASSERT_TRUE(other.ok()) << other.status();
    ASSERT_OK(uncounted(problem.buffers_with_output(other->as<mla_tail::bf16>())));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(LiveRowsAgree(problem, other->as<mla_tail::bf16>(), live));
  }

  // Every row below `live` of the problem's output equals `uncounted`'s bit for bit, and each
  // active one holds, at the first column (from one that moves with the row) whose reference
  // output cannot be ±0, a value the reference allows: so it is not all ±0.
  static absl::Status LiveRowsAgree(const Problem& problem, const mla_tail::bf16* uncounted,
                                    int live) {
    absl::StatusOr<std::vector<uint16_t>> got =
        DownloadBits(problem.buffers().output, problem.output_elements());
    if (!got.ok()) return got.status();
    absl::StatusOr<std::vector<uint16_t>> want = DownloadBits(uncounted, problem.output_elements());
    if (!want.ok()) return want.status();
    const ReferenceInputs in = problem.reference_inputs();
    const int q = problem.shape().q;
    const int64_t width = int64_t{problem.shape().heads} * mla_tail::kValueDim;
    const int64_t stride = problem.buffers().output_row_stride;
    std::string errors;
    int error_count = 0;
    auto report = [&](const std::string& what) {
      if (++error_count <= 8) absl::StrAppend(&errors, "\n  ", what);
    };
    for (int t = 0; t < live; ++t) {
      const uint16_t* row = got->data() + t * stride;
      const uint16_t* expected = want->data() + t * stride;
      for (int64_t c = 0; c < width; ++c) {
        if (row[c] != expected[c]) {
          report(absl::StrCat("row ", t, " column ", c, ": ", row[c], " with the count, ",
                              expected[c], " without"));
        }
      }
      if (problem.lengths()[t / q] <= 0) continue;  // inactive: +0.0 (Problem::Check)
      const bool all_zero =
          std::all_of(row, row + width, [](uint16_t bits) { return (bits & 0x7fff) == 0; });
      for (int64_t i = 0; i < width; ++i) {
        const int64_t c = (t * int64_t{131} + i) % width;
        const ReferenceElement ref =
            ReferenceOutput(in, t, static_cast<int>(c / mla_tail::kValueDim),
                            static_cast<int>(c % mla_tail::kValueDim));
        if (Bf16IsNan(ref.out)) continue;
        const OutputRange allowed = AllowedOutputs(ref, /*exact=*/true);
        if (!(allowed.least > 0 || allowed.greatest < 0)) continue;  // ±0 allowed there
        std::string why;
        if (all_zero) {
          report(absl::StrCat("active row ", t, " is all +-0; column ", c, " must be ", ref.out));
        } else if (!OutputAgrees(ref, row[c], /*exact=*/true, &why)) {
          report(absl::StrCat("row ", t, " column ", c, ": ", why));
        }
        break;
      }
    }
    if (error_count == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(error_count, " mismatches below the row count ", live,
                                            " (heads ", problem.shape().heads, ", rows ",
                                            problem.shape().rows, ", q ", q, "):", errors));
  }

  // Runs `run` with the count at each of `counts` (descending: padding only grows), and checks
  // the output with CheckLiveRows against `uncounted`.
  void ForEachCount(Problem& problem, const std::vector<int>& counts,
                    const std::function<absl::Status()>& run, const UncountedRun& uncounted) {
    const int rows = problem.shape().rows;
    for (int count : counts) {
      SCOPED_TRACE(absl::StrCat("row count ", count, " of ", rows));
      ASSERT_NO_FATAL_FAILURE(PadFrom(problem, count));
      ASSERT_OK(problem.PoisonOutput(problem.buffers().output, stream_));
      ASSERT_NO_FATAL_FAILURE(SetCount(count));
      ASSERT_OK(run());
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_NO_FATAL_FAILURE(CheckLiveRows(problem, std::clamp(count, 0, rows), uncounted));
    }
  }

  static std::vector<int> Counts(int rows) {
    return {rows + 5, rows, rows - 1, rows / 2 + 3, rows / 2, 1, 0, -3};
  }

  TailBuffers Counted(const Problem& problem) const {
    TailBuffers b = problem.buffers();
    b.row_count = count_.as<int32_t>();
    return b;
  }

  DeviceMemory count_;
};

// A path through the tail: the BMM path, the rule's choice, or a fused kernel forced.
using PathCase = std::pair<FusedKernel, TailPath>;

std::vector<PathCase> EveryPath() {
  std::vector<PathCase> paths = {{FusedKernel::kAuto, TailPath::kBmm},
                                 {FusedKernel::kAuto, TailPath::kAuto}};
  for (FusedKernel kernel : mla_tail::kFusedKernels) paths.push_back({kernel, TailPath::kFused});
  return paths;
}

// The every-path tests, a case per path (Bmm, Auto, ColumnSplit, ...), so that a sanitizer run
// can take the fused kernels without cuBLASLt's (racecheck takes minutes over those).
class RowCountPathTest : public RowCountGpuTest, public ::testing::WithParamInterface<PathCase> {};

std::string PathCaseName(const ::testing::TestParamInfo<PathCase>& info) {
  return info.param.second == TailPath::kBmm ? "Bmm" : mla_tail::FusedKernelName(info.param.first);
}

// Every fused kernel forced and the BMM path, eagerly: 0, 1, half, all and more rows live.
TEST_P(RowCountPathTest, EveryKernelServesOnlyTheLiveRows) {
  const auto& [kernel, path] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
  ASSERT_NE(tail, nullptr);
  for (int heads : {12, 64}) {
    for (int rows : ForProfile<int>({8, 16, 64, 200, 384}, {16, 200})) {
      SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), " ",
                                mla_tail::TailPathName(path), " heads ", heads, " rows ", rows));
      std::unique_ptr<Problem> problem = MakeProblem(heads, rows, heads * 1000 + rows);
      ASSERT_NE(problem, nullptr);
      const TailBuffers b = Counted(*problem);
      ForEachCount(
          *problem, Counts(rows), [&] { return tail->Run(problem->shape(), b, stream_, path); },
          Uncounted(*tail, path, problem->shape()));
    }
  }
}

// The count is in rows, not requests: with q > 1 a count inside a request keeps that request's
// rows below it (with the request's length) and leaves its rows past it untouched.
TEST_P(RowCountPathTest, TheCountIsInRowsWhateverQ) {
  const auto& [kernel, path] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
  ASSERT_NE(tail, nullptr);
  for (int q : {2, 3}) {
    const int rows = 24 * q;
    SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), " ", mla_tail::TailPathName(path),
                              " rows ", rows, " q ", q));
    std::unique_ptr<Problem> problem = MakeProblem(12, rows, 300 + q, /*gated=*/true, q);
    ASSERT_NE(problem, nullptr);
    const TailBuffers b = Counted(*problem);
    // No count a multiple of q.
    ForEachCount(
        *problem, {rows - 1, rows / 2 + 1, 2 * q + 1, q + 1, 1},
        [&] { return tail->Run(problem->shape(), b, stream_, path); },
        Uncounted(*tail, path, problem->shape()));
  }
}

// Without a gate: out = bf16(v) on active rows, +0.0 on inactive ones, on every kernel and the
// BMM path, without a row count and with one read after the wait or early.
TEST_P(RowCountPathTest, EveryKernelRunsWithoutAGate) {
  const auto& [kernel, path] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
  ASSERT_NE(tail, nullptr);
  for (int heads : {1, 12, 64}) {
    for (int rows : ForProfile<int>({1, 8, 17, 64, 200, 384}, {8, 200})) {
      SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), " ",
                                mla_tail::TailPathName(path), " heads ", heads, " rows ", rows));
      // A problem for each way of reading the count: ForEachCount pads it as the count falls.
      for (bool early : {false, true}) {
        SCOPED_TRACE(early ? "count read early" : "count read after the wait");
        std::unique_ptr<Problem> problem = MakeProblem(heads, rows, 7 + rows, /*gated=*/false);
        ASSERT_NE(problem, nullptr);
        ASSERT_EQ(problem->buffers().gate, nullptr);
        if (!early) {
          ASSERT_OK(tail->Run(problem->shape(), problem->buffers(), stream_, path));
          ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
          ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(8), true));
        }
        TailBuffers counted = Counted(*problem);
        counted.row_count_before_upstream = early;
        ForEachCount(
            *problem, {rows, rows / 2, 0},
            [&] { return tail->Run(problem->shape(), counted, stream_, path); },
            Uncounted(*tail, path, problem->shape()));
      }
    }
  }
}

// A count written before the upstream kernel (row_count_before_upstream) is read as the kernels
// start: every fused kernel forced, the rule and the BMM path (which reads it after the wait
// regardless), with 0, 1, half, all and more rows live.
TEST_P(RowCountPathTest, EveryKernelReadsAnEarlyCount) {
  const auto& [kernel, path] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
  ASSERT_NE(tail, nullptr);
  for (int heads : {12, 64}) {
    for (int rows : ForProfile<int>({16, 200}, {16})) {
      SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), " ",
                                mla_tail::TailPathName(path), " heads ", heads, " rows ", rows));
      std::unique_ptr<Problem> problem = MakeProblem(heads, rows, heads * 2000 + rows);
      ASSERT_NE(problem, nullptr);
      TailBuffers b = Counted(*problem);
      b.row_count_before_upstream = true;
      ForEachCount(
          *problem, Counts(rows), [&] { return tail->Run(problem->shape(), b, stream_, path); },
          Uncounted(*tail, path, problem->shape()));
    }
  }
}

// Rows past the count readable (rows_past_count_readable): the kernels may load them (they hold
// NaN latent and gate and length 1, as padding does) but write only the live rows, whose values
// are the reference's; with the count read after the wait and early, gated and without a gate.
TEST_P(RowCountPathTest, EveryKernelWritesOnlyLiveRowsWhenPaddingIsReadable) {
  const auto& [kernel, path] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
  ASSERT_NE(tail, nullptr);
  for (int heads : {12, 64}) {
    for (int rows : ForProfile<int>({16, 64, 200}, {16, 200})) {
      for (bool gated : {true, false}) {
        for (bool early : {false, true}) {
          SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), " ",
                                    mla_tail::TailPathName(path), " heads ", heads, " rows ", rows,
                                    gated ? " gated" : " no gate",
                                    early ? ", count read early" : ""));
          std::unique_ptr<Problem> problem =
              MakeProblem(heads, rows, heads * 3000 + rows + gated, gated);
          ASSERT_NE(problem, nullptr);
          TailBuffers b = Counted(*problem);
          b.rows_past_count_readable = true;
          b.row_count_before_upstream = early;
          ForEachCount(
              *problem, Counts(rows), [&] { return tail->Run(problem->shape(), b, stream_, path); },
              Uncounted(*tail, path, problem->shape()));
        }
      }
    }
  }
}

// The early count changes only when the count is read: the latent, gate and lengths are still
// read after the wait, with a gate and without one. The count is written in stream order before an
// upstream kernel that lets the tail launch at once and writes those inputs 50 us later; the tail,
// launched with PDL, must serve the live rows from the late writes.
TEST_F(RowCountGpuTest, AnEarlyCountStillWaitsForTheUpstreamInputs) {
  for (FusedKernel kernel : mla_tail::kFusedKernels) {
    std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
    ASSERT_NE(tail, nullptr);
    for (bool gated : {true, false}) {
      SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), gated ? " gated" : " no gate"));
      std::unique_ptr<Problem> problem = MakeProblem(12, 64, 81, gated);
      ASSERT_NE(problem, nullptr);
      TailBuffers b = Counted(*problem);
      b.row_count_before_upstream = true;
      const int rows = problem->shape().rows;
      absl::StatusOr<LateInputs> late = LateInputs::Save(*problem, stream_);
      ASSERT_TRUE(late.ok()) << late.status();
      for (int live : {rows, rows / 2 + 3}) {
        SCOPED_TRACE(absl::StrCat("row count ", live));
        SetCount(live);
        ASSERT_OK(late->Spoil(*problem, stream_));
        ASSERT_OK(problem->PoisonOutput(b.output, stream_));
        ASSERT_EQ(late->LaunchWriter(*problem, stream_), cudaSuccess);
        ASSERT_OK(tail->Run(problem->shape(), b, stream_, TailPath::kFused));
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        ASSERT_NO_FATAL_FAILURE(
            CheckLiveRows(*problem, live, Uncounted(*tail, TailPath::kFused, problem->shape())));
      }
    }
  }
}

// The count written by the upstream kernel itself, with the latent, gate and lengths: that kernel
// lets the tail launch at once and writes them 50 us later. Until then the count is wrong (0 in
// one round: a count read before the wait leaves the live rows unwritten; B in the other: it
// writes the rows past n), the latent and gate NaN and the lengths 0. The tail reads the count
// after its wait (row_count_before_upstream unset), and with the rows past the count readable
// (rows_past_count_readable) loads the latent, gate and lengths beside it, after the wait too.
// Every fused kernel forced, the rule and the BMM path, gated and not, at a count inside the last
// block and at about half (inside a request at q = 3); rows past the count are padding (NaN latent
// and gate, length 1) and must stay unwritten.
TEST_P(RowCountPathTest, EveryKernelReadsALateCountAfterTheWait) {
  const auto& [kernel, path] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
  ASSERT_NE(tail, nullptr);
  struct Shape {
    int heads, rows, q;
  };
  for (const Shape& shape :
       ForProfile<Shape>({{12, 16, 1}, {64, 16, 1}, {12, 200, 1}, {64, 200, 1}, {12, 72, 3}},
                         {{12, 16, 1}, {64, 72, 3}})) {
    for (bool gated : {true, false}) {
      for (bool readable : {false, true}) {
        SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), " ",
                                  mla_tail::TailPathName(path), " heads ", shape.heads, " rows ",
                                  shape.rows, " q ", shape.q, gated ? " gated" : " no gate",
                                  readable ? ", rows past the count readable" : ""));
        std::unique_ptr<Problem> problem = MakeProblem(
            shape.heads, shape.rows, shape.heads * 4000 + shape.rows + gated, gated, shape.q);
        ASSERT_NE(problem, nullptr);
        // Descending, so that the padding only grows.
        for (int live : {shape.rows - 1, shape.rows / 2 + 1}) {
          SCOPED_TRACE(absl::StrCat("row count ", live));
          ASSERT_NO_FATAL_FAILURE(PadFrom(*problem, live));
          absl::StatusOr<LateInputs> late = LateInputs::SaveWithCount(*problem, live, stream_);
          ASSERT_TRUE(late.ok()) << late.status();
          TailBuffers b = late->buffers(*problem);
          ASSERT_NE(b.row_count, nullptr);
          ASSERT_FALSE(b.row_count_before_upstream);
          b.rows_past_count_readable = readable;
          if (path == TailPath::kBmm) ASSERT_OK(tail->PrepareBmm(problem->shape(), b));
          for (int spoiled : {0, shape.rows}) {
            SCOPED_TRACE(absl::StrCat("count ", spoiled, " until the upstream kernel writes it"));
            ASSERT_OK(late->Spoil(*problem, stream_, spoiled));
            ASSERT_OK(problem->PoisonOutput(b.output, stream_));
            ASSERT_EQ(late->LaunchWriter(*problem, stream_), cudaSuccess);
            ASSERT_OK(tail->Run(problem->shape(), b, stream_, path));
            ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
            ASSERT_NO_FATAL_FAILURE(
                CheckLiveRows(*problem, live, Uncounted(*tail, path, problem->shape())));
          }
        }
      }
    }
  }
}

// A bucketed replay with the count touches nothing past the batch and needs no
// ZeroPaddingLengths (the padding keeps length 1); the count changes between replays of one
// graph, which reads it when it runs.
TEST_F(RowCountGpuTest, GraphSetReplaysServeOnlyTheLiveRows) {
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    for (const auto& [gated, readable] : {std::pair{true, false}, std::pair{false, false},
                                          std::pair{true, true}, std::pair{false, true}}) {
      SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), gated ? " gated" : " no gate",
                                readable ? ", rows past the count readable" : ""));
      std::unique_ptr<Problem> problem = MakeProblem(12, 64, 31, gated);
      ASSERT_NE(problem, nullptr);
      TailBuffers b = Counted(*problem);
      b.rows_past_count_readable = readable;
      GraphSetOptions options;
      options.heads = 12;
      options.layers = 1;
      options.buckets = {16, 64};
      options.path = path;
      absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
      ASSERT_TRUE(set.ok()) << set.status();
      ASSERT_OK((*set)->SetLayer(0, b));
      ASSERT_OK((*set)->CaptureAll());
      const int64_t captured = (*set)->stats().graphs_captured;
      // The uncounted runs: eager, on the set's path at the bucket's rows (the set's rule).
      std::unique_ptr<mla_tail::MlaTail> eager = MakeTail(FusedKernel::kAuto);
      ASSERT_NE(eager, nullptr);
      // Descending counts; each replays the bucket that holds it (64 down to 33, then 16).
      for (int live : {64, 63, 40, 33, 16, 9, 1}) {
        absl::StatusOr<int> bucket = (*set)->BucketRows(live);
        ASSERT_TRUE(bucket.ok()) << bucket.status();
        ForEachCount(
            *problem, {live}, [&] { return (*set)->Replay(0, std::max(live, 1), stream_); },
            Uncounted(*eager, path, {12, *bucket, 1}));
      }
      // The count at 0 with the smallest bucket: nothing written at all.
      ForEachCount(
          *problem, {0}, [&] { return (*set)->Replay(0, 16, stream_); },
          Uncounted(*eager, path, {12, 16, 1}));
      EXPECT_EQ((*set)->stats().graphs_captured, captured) << "a count change re-captured";
    }
  }
}

// A gate's presence picks the kernels' form: SetLayer from gated to ungated buffers re-captures
// the graph at its next replay, and each replay computes its own formula.
TEST_F(RowCountGpuTest, GraphSetSwitchesBetweenGatedAndUngated) {
  std::unique_ptr<Problem> gated = MakeProblem(12, 16, 41, true);
  std::unique_ptr<Problem> ungated = MakeProblem(12, 16, 41, false);
  ASSERT_TRUE(gated != nullptr && ungated != nullptr);
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    SCOPED_TRACE(mla_tail::TailPathName(path));
    GraphSetOptions options;
    options.heads = 12;
    options.layers = 1;
    options.buckets = {16};
    options.path = path;
    absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
    ASSERT_TRUE(set.ok()) << set.status();
    for (Problem* p : {gated.get(), ungated.get(), gated.get()}) {
      ASSERT_OK(p->PoisonOutput(p->buffers().output, stream_));
      ASSERT_OK((*set)->SetLayer(0, p->buffers()));
      ASSERT_OK((*set)->Replay(0, 16, stream_));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(p->Check(p->buffers().output, p->SampleRows(), true));
    }
    EXPECT_EQ((*set)->stats().graphs_captured, 3);
  }
}

// Nodes of the caller's graph: the count read at each launch (early, then after the wait); an
// update from gated to ungated buffers switches the node's kernel in place, and an update back
// to gated buffers switches it back; updates without a count make every row live.
TEST_F(RowCountGpuTest, NodesServeOnlyTheLiveRows) {
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(FusedKernel::kAuto);
  ASSERT_NE(tail, nullptr);
  for (int rows : {16, 64, 256}) {
    SCOPED_TRACE(absl::StrCat("rows ", rows));
    std::unique_ptr<Problem> gated = MakeProblem(64, rows, 51 + rows, true);
    std::unique_ptr<Problem> ungated = MakeProblem(64, rows, 61 + rows, false);
    ASSERT_TRUE(gated != nullptr && ungated != nullptr);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
    // Added with an early count, then updated to one read after the wait.
    TailBuffers early = Counted(*gated);
    early.row_count_before_upstream = true;
    absl::StatusOr<TailNode> node = mla_tail::AddTailNode(*tail, graph, {}, gated->shape(), early);
    ASSERT_TRUE(node.ok()) << node.status();
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    auto launch = [&] {
      return mla_tail::internal::CudaStatus(cudaGraphLaunch(exec, stream_), "launch");
    };
    // The uncounted runs: eager, on the fused path with the node's rule.
    ForEachCount(*gated, Counts(rows), launch, Uncounted(*tail, TailPath::kFused, gated->shape()));
    ASSERT_OK(node->Update(exec, Counted(*ungated)));
    ForEachCount(*ungated, Counts(rows), launch,
                 Uncounted(*tail, TailPath::kFused, ungated->shape()));
    // ForEachCount ends at counts 0 and -3, padding every row of its problem (NaN latent and
    // gate, length 1): the updates without a count, where every row is live, take problems of
    // their own.
    for (bool with_gate : {false, true}) {
      SCOPED_TRACE(with_gate ? "no count, gated" : "no count, no gate");
      std::unique_ptr<Problem> whole = MakeProblem(64, rows, 71 + rows + with_gate, with_gate);
      ASSERT_NE(whole, nullptr);
      ASSERT_OK(node->Update(exec, whole->buffers()));
      ASSERT_OK(whole->PoisonOutput(whole->buffers().output, stream_));
      ASSERT_OK(launch());
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(whole->Check(whole->buffers().output, whole->SampleRows(), true));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// The count is checked like every buffer: host memory, misalignment and an output over it are
// refused by name.
TEST_F(RowCountGpuTest, TheCountIsValidatedLikeEveryBuffer) {
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(FusedKernel::kAuto);
  ASSERT_NE(tail, nullptr);
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 71);
  ASSERT_NE(problem, nullptr);
  int32_t host_count = 16;
  TailBuffers b = problem->buffers();
  b.row_count = &host_count;
  absl::Status s = tail->Run(problem->shape(), b, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("row_count = "));
  b.row_count = reinterpret_cast<const int32_t*>(count_.as<char>() + 2);
  s = tail->Run(problem->shape(), b, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("row_count"));
  b.row_count = reinterpret_cast<const int32_t*>(problem->buffers().output) + 8;
  s = tail->Run(problem->shape(), b, stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("output overlaps row_count"));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true, 0));
}

INSTANTIATE_TEST_SUITE_P(EveryPath, RowCountPathTest, ::testing::ValuesIn(EveryPath()),
                         PathCaseName);

}  // namespace
}  // namespace mla_tail_testing

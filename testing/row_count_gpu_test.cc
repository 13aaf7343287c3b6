// The live row count (TailBuffers::row_count) and the tail without a gate, on every path: every
// fused kernel forced, the BMM path, graph sets and nodes. Padding rows hold what runtimes put
// there (NaN latent and gate, lengths 1 as SGLang pads them); the output's rows past the live
// count are NaN before the call and must stay so; the rows below it equal the CPU reference bit
// for bit.

#include <cuda_runtime.h>

#include <algorithm>
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
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/late_inputs.h"
#include "testing/support/problem.h"
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

  // Runs `run` with the count at each of `counts` (descending: padding only grows), and checks
  // the rows below the count against the reference and every row past it untouched. The rows
  // compared with the reference include the last q below the count: with q > 1 the request the
  // count splits, whose live rows keep its length.
  void ForEachCount(Problem& problem, const std::vector<int>& counts,
                    const std::function<absl::Status()>& run) {
    const int rows = problem.shape().rows;
    const int q = problem.shape().q;
    for (int count : counts) {
      SCOPED_TRACE(absl::StrCat("row count ", count, " of ", rows));
      PadFrom(problem, count);
      ASSERT_OK(problem.PoisonOutput(problem.buffers().output, stream_));
      SetCount(count);
      ASSERT_OK(run());
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      const int live = std::clamp(count, 0, rows);
      std::vector<int> sample = problem.SampleRows(8);
      for (int t = std::max(0, live - q); t < live; ++t) sample.push_back(t);
      std::sort(sample.begin(), sample.end());
      sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
      ASSERT_OK(problem.Check(problem.buffers().output, sample, true, live));
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
      ForEachCount(*problem, Counts(rows),
                   [&] { return tail->Run(problem->shape(), b, stream_, path); });
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
    ForEachCount(*problem, {rows - 1, rows / 2 + 1, 2 * q + 1, q + 1, 1},
                 [&] { return tail->Run(problem->shape(), b, stream_, path); });
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
        ForEachCount(*problem, {rows, rows / 2, 0},
                     [&] { return tail->Run(problem->shape(), counted, stream_, path); });
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
      ForEachCount(*problem, Counts(rows),
                   [&] { return tail->Run(problem->shape(), b, stream_, path); });
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
          ForEachCount(*problem, Counts(rows),
                       [&] { return tail->Run(problem->shape(), b, stream_, path); });
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
        ASSERT_OK(problem->Check(b.output, problem->SampleRows(8), true, live));
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
      // Descending counts; each replays the bucket that holds it (64 down to 33, then 16).
      for (int live : {64, 63, 40, 33, 16, 9, 1}) {
        ForEachCount(*problem, {live},
                     [&] { return (*set)->Replay(0, std::max(live, 1), stream_); });
      }
      // The count at 0 with the smallest bucket: nothing written at all.
      ForEachCount(*problem, {0}, [&] { return (*set)->Replay(0, 16, stream_); });
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
    ForEachCount(*gated, Counts(rows), launch);
    ASSERT_OK(node->Update(exec, Counted(*ungated)));
    ForEachCount(*ungated, Counts(rows), launch);
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
  EXPECT_THAT(std::string(s.message()), HasSubstr("row_count"));
  b.row_count = reinterpret_cast<const int32_t*>(problem->buffers().output) + 8;
  s = tail->Run(problem->shape(), b, stream_);
  EXPECT_THAT(std::string(s.message()), HasSubstr("output overlaps row_count"));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true, 0));
}

INSTANTIATE_TEST_SUITE_P(EveryPath, RowCountPathTest, ::testing::ValuesIn(EveryPath()),
                         PathCaseName);

}  // namespace
}  // namespace mla_tail_testing

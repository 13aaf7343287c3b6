// Faults on the GPU: a capture invalidated mid-way, cuBLASLt finding no algorithm or missing,
// device memory exhausted during capture and instantiation. Each must return a status, overwrite
// nothing of the caller's, publish no half-built graph, and leave a set whose retry succeeds
// once the cause is gone.

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/internal/fault_hooks.h"
#include "mla_tail/graph/buckets.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/device_filler.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/problem.h"
#include "testing/support/reference.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::GraphSetOptions;
using ::mla_tail::GraphSetStats;
using ::mla_tail::TailGraphSet;
using ::mla_tail::TailPath;
using ::testing::HasSubstr;

class FaultGpuTest : public mla_tail_testing::GpuStreamTest<> {
 protected:
  std::unique_ptr<Problem> MakeProblem(int heads, int rows, uint64_t seed) {
    ProblemOptions options;
    options.shape = {heads, rows, 1};
    options.seed = seed;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  // The problem's output still holds the NaN it was poisoned with: nothing was written.
  void ExpectUntouched(const Problem& problem) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(problem.buffers().output, problem.output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    int written = 0;
    for (uint16_t b : *bits) written += b != 0xffff;
    EXPECT_EQ(written, 0) << "elements of the caller's output were written by a failed call";
  }

  // Rows [0, computed) agree with the reference bit for bit; every other element (later rows,
  // the guard band) still holds its NaN.
  void ExpectRows(const Problem& problem, int computed) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(problem.buffers().output, problem.output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    const ReferenceInputs in = problem.reference_inputs();
    const int64_t stride = problem.buffers().output_row_stride;
    const int64_t width = int64_t{problem.shape().heads} * mla_tail::kValueDim;
    const int64_t rows = static_cast<int64_t>(bits->size()) / stride;
    int mismatches = 0;
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t c = 0; c < stride; ++c) {
        const uint16_t got = (*bits)[t * stride + c];
        std::string why;
        if (t >= computed || c >= width) {
          if (got == 0xffff) continue;
          why = "overwritten";
        } else if (OutputAgrees(
                       ReferenceOutput(in, t, c / mla_tail::kValueDim, c % mla_tail::kValueDim),
                       got, /*exact=*/true, &why)) {
          continue;
        }
        if (++mismatches <= 5) ADD_FAILURE() << "row " << t << " column " << c << ": " << why;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

  void ExpectCorrect(const Problem& problem) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem.Check(problem.buffers().output, problem.SampleRows(), /*exact=*/true));
  }
};

// Where the set's own capture is broken: as it begins, before the tail's launches (its checks of
// the stream see the invalidated capture), or after the launches, before the capture ends.
enum class BreakPoint { kBeforeTheLaunches, kAfterTheLaunches };

class CaptureFaultTest : public FaultGpuTest,
                         public ::testing::WithParamInterface<std::tuple<TailPath, BreakPoint>> {};

// The hook breaks the capture with a synchronisation CUDA prohibits on a capturing stream.
// Replay (lazy capture) and CaptureAll both fail with Aborted (a capture of the library's own,
// never the caller's FailedPrecondition), publish nothing, and succeed once the hook stops
// interfering; graphs captured before stay usable.
TEST_P(CaptureFaultTest, InvalidatedCaptureIsReportedAndRetried) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 64, 7);
  ASSERT_NE(problem, nullptr);
  std::atomic<bool> inject{false};
  std::atomic<int> injected{0};
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 2;
  options.buckets = {16, 64};
  options.path = std::get<0>(GetParam());
  const auto break_capture = [&](cudaStream_t capturing) {
    if (!inject) return;
    ++injected;
    // Prohibited while capturing: the capture is invalidated (the call's error is ignored here,
    // as the code that made it would not know about our capture).
    cudaStreamSynchronize(capturing);
  };
  mla_tail::internal::FaultHooks faults;
  if (std::get<1>(GetParam()) == BreakPoint::kBeforeTheLaunches) {
    faults.capture_began = break_capture;
  } else {
    faults.during_capture = break_capture;
  }
  mla_tail::internal::ScopedFaultHooks hooks(faults);
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  const mla_tail::TailBuffers b = problem->buffers();
  ASSERT_OK((*set)->SetLayer(0, b));
  ASSERT_OK((*set)->SetLayer(1, b));

  // A graph captured before the fault.
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*set)->Replay(0, 64, stream_));
  ExpectCorrect(*problem);
  const GraphSetStats before = (*set)->stats();

  inject = true;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
    const absl::Status replay = (*set)->Replay(1, 64, stream_);
    EXPECT_EQ(replay.code(), absl::StatusCode::kAborted) << replay;
    EXPECT_THAT(std::string(replay.message()), HasSubstr("capture"));
    ExpectUntouched(*problem);
  }
  const absl::Status all = (*set)->CaptureAll();
  EXPECT_EQ(all.code(), absl::StatusCode::kAborted) << all;
  EXPECT_EQ(injected, 4);
  EXPECT_EQ((*set)->stats().graphs_captured, before.graphs_captured);
  EXPECT_EQ((*set)->stats().instantiations, before.instantiations);
  EXPECT_EQ((*set)->stats().replays, before.replays);

  // The graph captured before the fault still replays, on the same stream.
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*set)->Replay(0, 64, stream_));
  ExpectCorrect(*problem);

  inject = false;
  ASSERT_OK((*set)->CaptureAll());
  EXPECT_EQ((*set)->stats().graphs_captured, before.graphs_captured + 3);
  for (int layer : {0, 1}) {
    for (int rows : {16, 64}) {
      SCOPED_TRACE(absl::StrCat("layer ", layer, " rows ", rows));
      ASSERT_OK(problem->PoisonOutput(b.output, stream_));
      ASSERT_OK((*set)->Replay(layer, rows, stream_));
      ExpectRows(*problem, rows);
    }
  }
  EXPECT_EQ(injected, 4);
}

INSTANTIATE_TEST_SUITE_P(
    PathsAndPoints, CaptureFaultTest,
    ::testing::Combine(::testing::Values(TailPath::kFused, TailPath::kBmm),
                       ::testing::Values(BreakPoint::kBeforeTheLaunches,
                                         BreakPoint::kAfterTheLaunches)),
    [](const ::testing::TestParamInfo<std::tuple<TailPath, BreakPoint>>& info) {
      return absl::StrCat(mla_tail::TailPathName(std::get<0>(info.param)),
                          std::get<1>(info.param) == BreakPoint::kBeforeTheLaunches
                              ? "BeforeTheLaunches"
                              : "AfterTheLaunches");
    });

// cuBLASLt finding no algorithm for the BMM path's GEMM: the eager tail and the graph set both
// return NotFound before anything is enqueued, and plan it once the heuristic finds one.
TEST_F(FaultGpuTest, NoBmmAlgorithmIsReportedAndRetried) {
  std::unique_ptr<Problem> problem = MakeProblem(64, 64, 11);
  ASSERT_NE(problem, nullptr);
  std::atomic<bool> inject{true};
  std::atomic<int> asked{0};
  mla_tail::internal::FaultHooks faults;
  faults.bmm_finds_no_algorithm = [&] {
    ++asked;
    return inject.load();
  };
  mla_tail::internal::ScopedFaultHooks hooks(faults);
  const mla_tail::TailBuffers b = problem->buffers();

  mla_tail::TailOptions tail_options;
  tail_options.max_rows = 64;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
      mla_tail::MlaTail::Create(0, tail_options);
  ASSERT_TRUE(tail.ok()) << tail.status();

  GraphSetOptions options;
  options.heads = 64;
  options.layers = 1;
  options.buckets = {64};
  options.path = TailPath::kBmm;
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, b));

  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
    const absl::Status eager = (*tail)->Run(problem->shape(), b, stream_, TailPath::kBmm);
    EXPECT_EQ(eager.code(), absl::StatusCode::kNotFound) << eager;
    EXPECT_THAT(std::string(eager.message()), HasSubstr("no algorithm"));
    const absl::Status prepared = (*tail)->PrepareBmm(problem->shape(), b);
    EXPECT_EQ(prepared.code(), absl::StatusCode::kNotFound) << prepared;
    const absl::Status replay = (*set)->Replay(0, 64, stream_);
    EXPECT_EQ(replay.code(), absl::StatusCode::kNotFound) << replay;
    const absl::Status all = (*set)->CaptureAll();
    EXPECT_EQ(all.code(), absl::StatusCode::kNotFound) << all;
    ExpectUntouched(*problem);
    // Planned before the scratch is allocated: nothing is held for a GEMM that cannot run.
    EXPECT_EQ((*tail)->scratch_bytes(), 0u);
    EXPECT_EQ((*set)->stats().scratch_bytes, 0);
  }
  EXPECT_EQ((*set)->stats().graphs_captured, 0);
  EXPECT_EQ((*set)->stats().replays, 0);
  // The fused path needs no plan: unaffected.
  ASSERT_OK((*tail)->Run(problem->shape(), b, stream_, TailPath::kFused));
  ExpectCorrect(*problem);

  inject = false;
  const int asked_before_retry = asked;
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*tail)->Run(problem->shape(), b, stream_, TailPath::kBmm));
  ExpectCorrect(*problem);
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*set)->Replay(0, 64, stream_));
  ExpectCorrect(*problem);
  EXPECT_EQ((*set)->stats().graphs_captured, 1);
  // Planned once per instance, then kept.
  ASSERT_OK((*tail)->Run(problem->shape(), b, stream_, TailPath::kBmm));
  ASSERT_OK((*set)->Replay(0, 64, stream_));
  EXPECT_EQ(asked, asked_before_retry + 2);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// cuBLASLt missing (loaded at run time, on the BMM path's first use): the BMM path returns
// FailedPrecondition before it allocates or enqueues anything, the fused path and graph sets of
// the fused path do not need it, and the BMM path works once cuBLASLt loads.
TEST_F(FaultGpuTest, MissingCublasLtFailsOnlyTheBmmPath) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 13);
  ASSERT_NE(problem, nullptr);
  std::atomic<bool> missing{true};
  mla_tail::internal::FaultHooks faults;
  faults.cublaslt_missing = [&] { return missing.load(); };
  mla_tail::internal::ScopedFaultHooks hooks(faults);
  const mla_tail::TailBuffers b = problem->buffers();

  mla_tail::TailOptions tail_options;
  tail_options.max_rows = 16;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
      mla_tail::MlaTail::Create(0, tail_options);
  ASSERT_TRUE(tail.ok()) << tail.status();
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {16};
  options.path = TailPath::kBmm;
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, b));

  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
    const absl::Status eager = (*tail)->Run(problem->shape(), b, stream_, TailPath::kBmm);
    EXPECT_EQ(eager.code(), absl::StatusCode::kFailedPrecondition) << eager;
    EXPECT_THAT(std::string(eager.message()), HasSubstr("cuBLASLt"));
    const absl::Status prepared = (*tail)->PrepareBmm(problem->shape(), b);
    EXPECT_EQ(prepared.code(), absl::StatusCode::kFailedPrecondition) << prepared;
    const absl::Status replay = (*set)->Replay(0, 16, stream_);
    EXPECT_EQ(replay.code(), absl::StatusCode::kFailedPrecondition) << replay;
    ExpectUntouched(*problem);
    EXPECT_EQ((*tail)->scratch_bytes(), 0u);
  }
  EXPECT_EQ((*set)->stats().graphs_captured, 0);
  ASSERT_OK((*tail)->Run(problem->shape(), b, stream_, TailPath::kFused));
  ExpectCorrect(*problem);

  missing = false;
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*tail)->Run(problem->shape(), b, stream_, TailPath::kBmm));
  ExpectCorrect(*problem);
  EXPECT_GT((*tail)->scratch_bytes(), 0u);
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*set)->Replay(0, 16, stream_));
  ExpectCorrect(*problem);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// Device memory exhausted: with every byte taken, capturing and instantiating graphs ahead of
// time fails with a status, and a lazy capture either fails too or computes the tail; no graph
// that failed is published; once memory is back, the same set captures the rest and every graph
// replays correctly. The set's own scratch was allocated at Create, before the device filled up.
// The sanitizer profile captures 3 layers of buckets up to 64 rows instead of 8 up to 256.
TEST_F(FaultGpuTest, DeviceMemoryExhaustedDuringCaptureIsReportedAndRetried) {
  const int kLayers = ForProfile(8, 3);
  const int kRows = ForProfile(256, 64);
  std::unique_ptr<Problem> problem = MakeProblem(12, kRows, 13);
  ASSERT_NE(problem, nullptr);
  const mla_tail::TailBuffers b = problem->buffers();
  GraphSetOptions options;
  options.heads = 12;
  options.layers = kLayers;
  options.buckets = mla_tail::DefaultBuckets(1);
  while (options.buckets.back() > kRows) options.buckets.pop_back();
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  for (int layer = 0; layer < kLayers; ++layer) ASSERT_OK((*set)->SetLayer(layer, b));
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  DeviceFiller filler;
  const size_t taken = filler.Fill();
  RecordProperty("bytes_filled", std::to_string(taken));
  size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  RecordProperty("bytes_free_after_fill", std::to_string(free_bytes));

  const absl::Status all = (*set)->CaptureAll();
  EXPECT_FALSE(all.ok()) << "every graph was captured and instantiated with the device full ("
                         << free_bytes << " bytes free): the fault was not injected";
  EXPECT_EQ(all.code(), absl::StatusCode::kResourceExhausted) << all;
  const GraphSetStats full = (*set)->stats();
  RecordProperty("graphs_captured_while_full", static_cast<int>(full.graphs_captured));
  const int graphs = kLayers * static_cast<int>(options.buckets.size());
  EXPECT_LT(full.graphs_captured, graphs);
  // The last layer's largest bucket comes last in CaptureAll's order: not captured. Replaying it
  // tries a lazy capture. That fails the same way and writes nothing, or, where the failed
  // CaptureAll left enough memory free for one more graph (it can), succeeds and computes the
  // tail.
  const absl::Status replay = (*set)->Replay(kLayers - 1, kRows, stream_);
  RecordProperty("lazy_capture_while_full", replay.ok() ? "succeeded" : "failed");
  if (replay.ok()) {
    ExpectCorrect(*problem);
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  } else {
    EXPECT_EQ(replay.code(), absl::StatusCode::kResourceExhausted) << replay;
    ExpectUntouched(*problem);
  }
  cudaGetLastError();

  filler.Release();
  ASSERT_OK((*set)->CaptureAll());
  EXPECT_EQ((*set)->stats().graphs_captured, graphs);
  EXPECT_EQ((*set)->stats().instantiations, graphs);
  for (int layer = 0; layer < kLayers; ++layer) {
    SCOPED_TRACE(absl::StrCat("layer ", layer));
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
    ASSERT_OK((*set)->Replay(layer, kRows, stream_));
    ExpectCorrect(*problem);
  }
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK((*set)->Replay(0, 5, stream_));  // a small bucket captured after the fault
  ExpectRows(*problem, *(*set)->BucketRows(5));
}

// Other work captured on the caller's stream while RecordTailNode records there (the hook stands
// in for another thread launching into the stream): the capture's last node is no longer the
// tail's, and RecordTailNode refuses with FailedPrecondition instead of handing out a handle to
// another node. The caller's capture stays valid and holds both nodes. The other work is a memset,
// a kernel of another function (the same shape's tail through another forced kernel), and the
// same kernel with the same configuration into another output (only its argument differs).
// Without it, the handle updates the caller's graph.
TEST_F(FaultGpuTest, OtherWorkCapturedWhileATailIsRecordedIsRefused) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 64, 17);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> other = problem->NewOutput(stream_);
  ASSERT_TRUE(other.ok()) << other.status();
  mla_tail::TailOptions recording_options;
  recording_options.fused_kernel = mla_tail::FusedKernel::kColumnSplit;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> recording =
      mla_tail::MlaTail::Create(0, recording_options);
  ASSERT_TRUE(recording.ok()) << recording.status();
  mla_tail::TailOptions other_options;
  other_options.fused_kernel = mla_tail::FusedKernel::kLatentSplit;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> other_tail =
      mla_tail::MlaTail::Create(0, other_options);
  ASSERT_TRUE(other_tail.ok()) << other_tail.status();
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> same_kernel_tail =
      mla_tail::MlaTail::Create(0, recording_options);
  ASSERT_TRUE(same_kernel_tail.ok()) << same_kernel_tail.status();

  enum class Work { kNone, kMemset, kOtherKernel, kSameKernelOtherOutput };
  std::atomic<Work> work{Work::kNone};
  std::atomic<int> injected{0};
  mla_tail::internal::FaultHooks faults;
  faults.before_node_read_back = [&](cudaStream_t capturing) {
    switch (work.load()) {
      case Work::kNone:
        return;
      case Work::kMemset:
        EXPECT_EQ(cudaMemsetAsync(other->get(), 0, 16, capturing), cudaSuccess);
        break;
      case Work::kOtherKernel:
        EXPECT_OK((*other_tail)
                      ->Run(problem->shape(),
                            problem->buffers_with_output(other->as<mla_tail::bf16>()), capturing));
        break;
      case Work::kSameKernelOtherOutput:
        EXPECT_OK((*same_kernel_tail)
                      ->Run(problem->shape(),
                            problem->buffers_with_output(other->as<mla_tail::bf16>()), capturing));
        break;
    }
    ++injected;
  };
  mla_tail::internal::ScopedFaultHooks hooks(faults);

  for (Work w : {Work::kMemset, Work::kOtherKernel, Work::kSameKernelOtherOutput}) {
    SCOPED_TRACE(w == Work::kMemset        ? "memset"
                 : w == Work::kOtherKernel ? "another kernel"
                                           : "the same kernel into another output");
    work = w;
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
    const absl::StatusOr<mla_tail::TailNode> node =
        mla_tail::RecordTailNode(**recording, stream_, problem->shape(), problem->buffers());
    ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
    EXPECT_EQ(node.status().code(), absl::StatusCode::kFailedPrecondition) << node.status();
    EXPECT_THAT(std::string(node.status().message()), HasSubstr("other work was captured"));
    size_t nodes = 0;
    ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
    EXPECT_EQ(nodes, 2u) << "the capture holds the tail's node and the other work";
    cudaGraphDestroy(graph);
  }
  EXPECT_EQ(injected, 3);

  work = Work::kNone;
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  absl::StatusOr<mla_tail::TailNode> node =
      mla_tail::RecordTailNode(**recording, stream_, problem->shape(), problem->buffers());
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_TRUE(node.ok()) << node.status();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_OK(node->Update(exec, problem->buffers_with_output(other->as<mla_tail::bf16>())));
  ASSERT_OK(problem->PoisonOutput(other->as<mla_tail::bf16>(), stream_));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(other->as<mla_tail::bf16>(), problem->SampleRows(), /*exact=*/true));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// The library leaves the caller's CUDA error state alone: an error pending from the caller's own
// call stays pending through successful calls, and a failed call of the library's own leaves
// none behind.
TEST_F(FaultGpuTest, TheCallersErrorStateIsKept) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 81);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> created = mla_tail::MlaTail::Create(0, {});
  ASSERT_TRUE(created.ok()) << created.status();
  mla_tail::MlaTail* tail_ = created->get();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  // The caller's own failed call: an error pending in the thread's last-error slot.
  ASSERT_EQ(cudaMemcpyAsync(nullptr, nullptr, 16, cudaMemcpyDeviceToDevice, stream_),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  auto still_pending = [](const char* after) {
    EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue)
        << after << " cleared the caller's pending error";
  };
  ASSERT_OK(tail_->Run(problem->shape(), problem->buffers(), stream_));
  still_pending("MlaTail::Run");
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {16};
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  still_pending("TailGraphSet::Create");
  ASSERT_OK((*set)->SetLayer(0, problem->buffers()));
  ASSERT_OK((*set)->Replay(0, 16, stream_));
  still_pending("TailGraphSet::Replay (with its capture)");
  cudaGraph_t built = nullptr;
  ASSERT_EQ(cudaGraphCreate(&built, 0), cudaSuccess);
  ASSERT_TRUE(mla_tail::AddTailNode(*tail_, built, {}, problem->shape(), problem->buffers()).ok());
  still_pending("AddTailNode");
  cudaGraphDestroy(built);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // A CUDA call of the library's own that fails (the node is not in the executable graph the
  // caller gave) reports InvalidArgument, the caller's handle being at fault (docs/spec.md,
  // "Errors"), carrying the CUDA error as every status from CUDA does, and leaves no error
  // pending.
  cudaGraph_t graph = nullptr, other_graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphCreate(&other_graph, 0), cudaSuccess);
  absl::StatusOr<mla_tail::TailNode> nodes =
      mla_tail::AddTailNode(*tail_, graph, {}, problem->shape(), problem->buffers());
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_TRUE(
      mla_tail::AddTailNode(*tail_, other_graph, {}, problem->shape(), problem->buffers()).ok());
  cudaGraphExec_t other_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&other_exec, other_graph, 0), cudaSuccess);
  const absl::Status wrong_exec = nodes->Update(other_exec, problem->buffers());
  EXPECT_EQ(wrong_exec.code(), absl::StatusCode::kInvalidArgument) << wrong_exec;
  ASSERT_TRUE(mla_tail::CudaErrorOf(wrong_exec).has_value()) << wrong_exec;
  EXPECT_THAT(*mla_tail::CudaErrorOf(wrong_exec),
              ::testing::AnyOf(cudaErrorInvalidValue, cudaErrorInvalidResourceHandle));
  EXPECT_FALSE(mla_tail::IsStickyCudaError(wrong_exec));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the library left its own error pending";
  cudaGraphExecDestroy(other_exec);
  cudaGraphDestroy(other_graph);
  cudaGraphDestroy(graph);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

}  // namespace
}  // namespace mla_tail_testing

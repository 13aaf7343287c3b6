// The tail inside a runtime's own graphs: nodes added to the caller's graph after an upstream
// kernel (with and without the programmatic edge), in-place updates of the caller's executable
// graph while earlier launches are queued, recording into the caller's capture (RecordTailNode,
// TailGraphSet::Replay), every public call while another thread captures, destruction with work
// in flight.

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/late_writer.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::AddTailNode;
using ::mla_tail::GraphSetOptions;
using ::mla_tail::RecordTailNode;
using ::mla_tail::TailGraphSet;
using ::mla_tail::TailNode;
using ::mla_tail::TailNodeOptions;
using ::mla_tail::TailPath;
using ::testing::HasSubstr;

// Holds a stream's later work until Release() (or a watchdog's timeout): a host function that
// blocks, so that launches enqueued behind it stay queued while the test changes things.
class StreamGate {
 public:
  ~StreamGate() { Release(); }
  cudaError_t Close(cudaStream_t stream) { return cudaLaunchHostFunc(stream, &Wait, this); }
  void Release() { open_.store(true); }

 private:
  static void Wait(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!gate->open_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::atomic<bool> open_{false};
};

class EmbeddingGpuTest : public GpuStreamTest<> {
 protected:
  void SetUp() override {
    GpuStreamTest::SetUp();
    if (!StreamReady()) return;
    mla_tail::TailOptions options;
    options.max_rows = 64;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    ASSERT_TRUE(tail.ok()) << tail.status();
    tail_ = *std::move(tail);
  }

  std::unique_ptr<Problem> MakeProblem(int heads, int rows, uint64_t seed, int inactive_every = 3) {
    ProblemOptions options;
    options.shape = {heads, rows, 1};
    options.seed = seed;
    options.inactive_every = inactive_every;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  std::unique_ptr<mla_tail::MlaTail> tail_;
};

// A problem whose latent, gate and lengths an upstream kernel writes late: before it, they hold
// NaN and zero lengths, so a tail that read them before its dependency wait shows it.
struct LateInputs {
  DeviceMemory saved;
  size_t latent_bytes = 0, gate_bytes = 0, lengths_bytes = 0;

  static absl::StatusOr<LateInputs> Save(const Problem& problem) {
    const mla_tail::TailBuffers b = problem.buffers();
    const int rows = problem.shape().rows;
    LateInputs late;
    late.latent_bytes = size_t(rows) * b.latent_row_stride * 2;
    late.gate_bytes = size_t(rows) * b.gate_row_stride * 2;
    late.lengths_bytes = size_t(rows) * 4;
    absl::StatusOr<DeviceMemory> saved =
        DeviceMemory::Allocate(late.latent_bytes + late.gate_bytes + late.lengths_bytes);
    if (!saved.ok()) return saved.status();
    late.saved = *std::move(saved);
    char* s = late.saved.as<char>();
    for (const auto& [dst, src, bytes] :
         {std::tuple{s, static_cast<const void*>(b.latent), late.latent_bytes},
          {s + late.latent_bytes, b.gate, late.gate_bytes},
          {s + late.latent_bytes + late.gate_bytes, b.lengths, late.lengths_bytes}}) {
      if (cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice) != cudaSuccess) {
        return absl::InternalError("saving the inputs");
      }
    }
    return late;
  }

  // Overwrites the inputs with NaN and zero lengths (in stream order).
  absl::Status Spoil(const Problem& problem, cudaStream_t stream) const {
    const mla_tail::TailBuffers b = problem.buffers();
    if (cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.latent), 0xff, latent_bytes, stream) ||
        cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.gate), 0xff, gate_bytes, stream) ||
        cudaMemsetAsync(const_cast<int32_t*>(b.lengths), 0, lengths_bytes, stream)) {
      return absl::InternalError("spoiling the inputs");
    }
    return absl::OkStatus();
  }

  // The upstream kernel: triggers its dependents at once, writes the inputs 50 us later.
  cudaError_t LaunchWriter(const Problem& problem, cudaStream_t stream) const {
    const mla_tail::TailBuffers b = problem.buffers();
    const char* s = saved.as<char>();
    const LateCopy copies[3] = {
        {s, const_cast<mla_tail::bf16*>(b.latent), latent_bytes},
        {s + latent_bytes, const_cast<mla_tail::bf16*>(b.gate), gate_bytes},
        {s + latent_bytes + gate_bytes, const_cast<int32_t*>(b.lengths), lengths_bytes}};
    return LaunchLateWriter(copies, 50000, stream);
  }
};

// The only node of a graph captured from one kernel launch.
absl::StatusOr<cudaGraphNode_t> OnlyNode(cudaGraph_t graph) {
  size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess || count != 1) {
    return absl::InternalError(absl::StrCat("expected one node, found ", count));
  }
  cudaGraphNode_t node = nullptr;
  if (cudaGraphGetNodes(graph, &node, &count) != cudaSuccess) {
    return absl::InternalError("cudaGraphGetNodes");
  }
  return node;
}

// The tail added to the caller's graph after an upstream kernel that writes its inputs late:
// with the programmatic edge (the default) and without, at the shapes a runtime embeds, every
// output equals the reference; the edge is programmatic exactly when asked for.
TEST_F(EmbeddingGpuTest, AddedNodesRunAfterTheUpstreamKernel) {
  for (bool programmatic : {true, false}) {
    for (const auto& [heads, rows] : {std::pair{12, 1}, {12, 16}, {12, 64}, {64, 1}, {64, 16}}) {
      SCOPED_TRACE(absl::StrCat(programmatic ? "programmatic" : "full", " edge, heads ", heads,
                                " rows ", rows));
      std::unique_ptr<Problem> problem = MakeProblem(heads, rows, 7 + heads + rows, 0);
      ASSERT_NE(problem, nullptr);
      absl::StatusOr<LateInputs> late = LateInputs::Save(*problem);
      ASSERT_TRUE(late.ok()) << late.status();

      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      ASSERT_EQ(late->LaunchWriter(*problem, stream_), cudaSuccess);
      ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
      absl::StatusOr<cudaGraphNode_t> upstream = OnlyNode(graph);
      ASSERT_TRUE(upstream.ok()) << upstream.status();

      TailNodeOptions options;
      options.programmatic_edge = programmatic;
      absl::StatusOr<TailNode> nodes =
          AddTailNode(*tail_, graph, {*upstream}, problem->shape(), problem->buffers(), options);
      ASSERT_TRUE(nodes.ok()) << nodes.status();
      EXPECT_EQ(nodes->kernel(), tail_->FusedKernelFor(problem->shape()));
      cudaGraphNode_t dependency = nullptr;
      cudaGraphEdgeData edge = {};
      size_t count = 1;
      ASSERT_EQ(cudaGraphNodeGetDependencies(nodes->node(), &dependency, &edge, &count),
                cudaSuccess);
      ASSERT_EQ(count, 1u);
      EXPECT_EQ(dependency, *upstream);
      EXPECT_EQ(edge.type == cudaGraphDependencyTypeProgrammatic, programmatic);

      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      for (int round = 0; round < 2; ++round) {
        ASSERT_OK(late->Spoil(*problem, stream_));
        ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
        ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  }
}

// Updates of the caller's executable graph apply to later launches only: three launches queued
// behind a closed gate, the pointers changed between them, each writes where it was told to.
TEST_F(EmbeddingGpuTest, UpdatesApplyToLaterLaunchesWhileEarlierOnesAreQueued) {
  std::unique_ptr<Problem> a = MakeProblem(12, 16, 31);
  std::unique_ptr<Problem> b = MakeProblem(12, 16, 32);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<DeviceMemory> second_a = a->NewOutput(stream_);
  ASSERT_TRUE(second_a.ok()) << second_a.status();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  absl::StatusOr<TailNode> nodes = AddTailNode(*tail_, graph, {}, a->shape(), a->buffers());
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_OK(a->PoisonOutput(a->buffers().output, stream_));
  ASSERT_OK(b->PoisonOutput(b->buffers().output, stream_));

  StreamGate gate;
  ASSERT_EQ(gate.Close(stream_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_OK(nodes->Update(exec, b->buffers()));
  EXPECT_EQ(nodes->buffers().output, b->buffers().output);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_OK(nodes->Update(exec, a->buffers_with_output(second_a->as<mla_tail::bf16>())));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady);
  gate.Release();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(a->Check(a->buffers().output, a->SampleRows(), true));
  ASSERT_OK(b->Check(b->buffers().output, b->SampleRows(), true));
  ASSERT_OK(a->Check(second_a->as<mla_tail::bf16>(), a->SampleRows(), true));

  // UpdateGraph rewrites the template: a new instantiation holds the new pointers.
  absl::StatusOr<DeviceMemory> third_a = a->NewOutput(stream_);
  ASSERT_TRUE(third_a.ok());
  ASSERT_OK(nodes->UpdateGraph(a->buffers_with_output(third_a->as<mla_tail::bf16>())));
  cudaGraphExec_t fresh = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&fresh, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(fresh, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(a->Check(third_a->as<mla_tail::bf16>(), a->SampleRows(), true));
  cudaGraphExecDestroy(fresh);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Bad arguments: a clear status, nothing added, nothing of the caller's executable graph changed.
TEST_F(EmbeddingGpuTest, BadArgumentsAreRefused) {
  std::unique_ptr<Problem> a = MakeProblem(12, 16, 41);
  ASSERT_NE(a, nullptr);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  EXPECT_EQ(AddTailNode(*tail_, nullptr, {}, a->shape(), a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  mla_tail::TailBuffers broken = a->buffers();
  broken.lengths = nullptr;
  EXPECT_THAT(std::string(AddTailNode(*tail_, graph, {}, a->shape(), broken).status().message()),
              HasSubstr("lengths is null"));
  EXPECT_EQ(AddTailNode(*tail_, graph, {}, {0, 16, 1}, a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const cudaGraphNode_t null_node = nullptr;
  EXPECT_EQ(AddTailNode(*tail_, graph, {null_node}, a->shape(), a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0u) << "a refused call added a node";

  absl::StatusOr<TailNode> nodes = AddTailNode(*tail_, graph, {}, a->shape(), a->buffers());
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(nodes->Update(exec, broken).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nodes->Update(nullptr, a->buffers()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nodes->buffers().gate, a->buffers().gate) << "a refused update changed the handle";
  ASSERT_OK(a->PoisonOutput(a->buffers().output, stream_));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(a->Check(a->buffers().output, a->SampleRows(), true));

  // RecordTailNode needs a capturing stream.
  const absl::Status not_capturing =
      RecordTailNode(*tail_, stream_, a->shape(), a->buffers()).status();
  EXPECT_EQ(not_capturing.code(), absl::StatusCode::kFailedPrecondition) << not_capturing;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A runtime that captures its own step: RecordTailNode records the tail after the upstream
// kernel with a programmatic edge, and its handle updates the runtime's executable graph.
TEST_F(EmbeddingGpuTest, RecordTailNodeIntoTheCallersCapture) {
  std::unique_ptr<Problem> problem = MakeProblem(64, 16, 51, 0);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<LateInputs> late = LateInputs::Save(*problem);
  ASSERT_TRUE(late.ok()) << late.status();
  absl::StatusOr<DeviceMemory> other = problem->NewOutput(stream_);
  ASSERT_TRUE(other.ok());

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(late->LaunchWriter(*problem, stream_), cudaSuccess);
  absl::StatusOr<TailNode> nodes =
      RecordTailNode(*tail_, stream_, problem->shape(), problem->buffers());
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  cudaGraphEdgeData edge = {};
  cudaGraphNode_t dependency = nullptr;
  size_t count = 1;
  ASSERT_EQ(cudaGraphNodeGetDependencies(nodes->node(), &dependency, &edge, &count), cudaSuccess);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(edge.type, cudaGraphDependencyTypeProgrammatic);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (mla_tail::bf16* output : {problem->buffers().output, other->as<mla_tail::bf16>()}) {
    ASSERT_OK(nodes->Update(exec, problem->buffers_with_output(output)));
    ASSERT_OK(late->Spoil(*problem, stream_));
    ASSERT_OK(problem->PoisonOutput(output, stream_));
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem->Check(output, problem->SampleRows(), true));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

class ReplayInCaptureTest
    : public GpuStreamTest<::testing::TestWithParam<std::tuple<TailPath, cudaStreamCaptureMode>>> {
};

// TailGraphSet::Replay on a stream the caller is capturing (each capture mode, both paths)
// records the tail into that capture: the capture stays valid and its graph computes the tail.
// A BMM bucket not captured beforehand is refused without breaking the capture.
TEST_P(ReplayInCaptureTest, RecordsIntoTheCallersCapture) {
  const auto [path, mode] = GetParam();
  ProblemOptions problem_options;
  problem_options.shape = {12, 16, 1};
  absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(problem_options, stream_);
  ASSERT_TRUE(problem.ok()) << problem.status();
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {8, 16};
  options.path = path;
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, (*problem)->buffers()));

  if (path == TailPath::kBmm) {
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, mode), cudaSuccess);
    const absl::Status unprepared = (*set)->Replay(0, 16, stream_);
    EXPECT_EQ(unprepared.code(), absl::StatusCode::kFailedPrecondition) << unprepared;
    ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess) << "the capture broke";
    cudaGraphDestroy(graph);
    ASSERT_OK((*set)->CaptureAll());
  }

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, mode), cudaSuccess);
  const absl::Status replayed = (*set)->Replay(0, 16, stream_);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess) << "the capture broke";
  ASSERT_OK(replayed);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_OK((*problem)->PoisonOutput((*problem)->buffers().output, stream_));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK((*problem)->Check((*problem)->buffers().output, (*problem)->SampleRows(), true));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

INSTANTIATE_TEST_SUITE_P(PathsAndModes, ReplayInCaptureTest,
                         ::testing::Combine(::testing::Values(TailPath::kFused, TailPath::kBmm),
                                            ::testing::Values(cudaStreamCaptureModeGlobal,
                                                              cudaStreamCaptureModeThreadLocal,
                                                              cudaStreamCaptureModeRelaxed)),
                         [](const auto& info) {
                           const cudaStreamCaptureMode mode = std::get<1>(info.param);
                           return absl::StrCat(mla_tail::TailPathName(std::get<0>(info.param)),
                                               mode == cudaStreamCaptureModeGlobal ? "Global"
                                               : mode == cudaStreamCaptureModeThreadLocal
                                                   ? "ThreadLocal"
                                                   : "Relaxed");
                         });

// Another thread's stream capture in Global mode on a blocking stream (one that legacy-stream
// work would join), begun on construction and ended by Finish().
class CaptureOnAnotherThread {
 public:
  explicit CaptureOnAnotherThread(void* scratch) {
    std::promise<void> capturing;
    std::future<void> started = capturing.get_future();
    thread_ = std::thread([this, scratch, &capturing] {
      cudaSetDevice(0);
      cudaStream_t blocking = nullptr;
      cudaStreamCreate(&blocking);
      cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal);
      cudaMemsetAsync(scratch, 0, 4096, blocking);
      capturing.set_value();
      finish_.get_future().wait();
      cudaMemsetAsync(scratch, 1, 4096, blocking);
      cudaGraph_t graph = nullptr;
      ended_ = cudaStreamEndCapture(blocking, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaStreamDestroy(blocking);
    });
    started.wait();
  }
  ~CaptureOnAnotherThread() { Finish(); }

  // How the other thread's capture ended.
  cudaError_t Finish() {
    if (thread_.joinable()) {
      finish_.set_value();
      thread_.join();
    }
    return ended_;
  }

 private:
  std::thread thread_;
  std::promise<void> finish_;
  cudaError_t ended_ = cudaErrorUnknown;
};

// While another thread captures, every public entry point (creation, BMM preparation with its
// allocations, eager runs, graph building, graph-set creation, lazy and ahead-of-time captures,
// replays, exports, destruction with work in flight) succeeds and leaves that capture intact.
// Each call runs during a capture of its own, so a failure names the call.
TEST_F(EmbeddingGpuTest, EveryCallIsSafeWhileAnotherThreadCaptures) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 61);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> scratch = DeviceMemory::Allocate(4096);
  ASSERT_TRUE(scratch.ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  auto during_capture = [&](const char* call, const std::function<absl::Status()>& run) {
    CaptureOnAnotherThread other(scratch->get());
    const absl::Status status = run();
    const cudaError_t ended = other.Finish();
    EXPECT_TRUE(status.ok()) << call << ": " << status;
    EXPECT_EQ(ended, cudaSuccess) << call
                                  << " broke another thread's capture: " << cudaGetErrorName(ended);
  };

  std::unique_ptr<mla_tail::MlaTail> tail;
  during_capture("MlaTail::Create", [&] {
    mla_tail::TailOptions options;
    options.max_rows = 64;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> created =
        mla_tail::MlaTail::Create(0, options);
    if (created.ok()) tail = *std::move(created);
    return created.status();
  });
  ASSERT_NE(tail, nullptr);
  const mla_tail::TailBuffers b = problem->buffers();
  during_capture("MlaTail::PrepareBmm", [&] { return tail->PrepareBmm(problem->shape(), b); });
  during_capture("MlaTail::Run (BMM)",
                 [&] { return tail->Run(problem->shape(), b, stream_, TailPath::kBmm); });
  during_capture("MlaTail::Run (fused)", [&] { return tail->Run(problem->shape(), b, stream_); });
  during_capture("AddTailNode", [&] {
    cudaGraph_t graph = nullptr;
    if (cudaGraphCreate(&graph, 0) != cudaSuccess) return absl::InternalError("cudaGraphCreate");
    const absl::Status added = AddTailNode(*tail, graph, {}, problem->shape(), b).status();
    cudaGraphDestroy(graph);
    return added;
  });
  during_capture("~MlaTail (BMM run in flight)", [&] {
    tail.reset();
    return absl::OkStatus();
  });
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    SCOPED_TRACE(mla_tail::TailPathName(path));
    std::unique_ptr<TailGraphSet> set;
    during_capture("TailGraphSet::Create", [&] {
      GraphSetOptions options;
      options.heads = 12;
      options.layers = 2;
      options.buckets = {8, 16};
      options.path = path;
      absl::StatusOr<std::unique_ptr<TailGraphSet>> created = TailGraphSet::Create(0, options);
      if (created.ok()) set = *std::move(created);
      return created.status();
    });
    ASSERT_NE(set, nullptr);
    during_capture("TailGraphSet::SetLayer", [&] {
      absl::Status status = set->SetLayer(0, b);
      status.Update(set->SetLayer(1, b));
      return status;
    });
    during_capture("TailGraphSet::Replay (lazy capture)",
                   [&] { return set->Replay(0, 16, stream_); });
    during_capture("TailGraphSet::CaptureAll", [&] { return set->CaptureAll(); });
    during_capture("TailGraphSet::Replay", [&] { return set->Replay(1, 8, stream_); });
    during_capture("TailGraphSet::ExportGraph", [&] {
      absl::StatusOr<cudaGraph_t> exported = set->ExportGraph(1, 16);
      if (exported.ok()) cudaGraphDestroy(*exported);
      return exported.status();
    });
    during_capture("~TailGraphSet (replays in flight)", [&] {
      set.reset();
      return absl::OkStatus();
    });
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
}

// Destroying a tail or a graph set never waits for the GPU, and work they enqueued completes
// correctly after them (the BMM scratch is freed in stream order behind it).
TEST_F(EmbeddingGpuTest, DestructionWithWorkInFlight) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 71);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> second = problem->NewOutput(stream_);
  ASSERT_TRUE(second.ok());
  ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));

  mla_tail::TailOptions tail_options;
  tail_options.max_rows = 64;
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
  ASSERT_OK((*set)->SetLayer(0, problem->buffers_with_output(second->as<mla_tail::bf16>())));
  ASSERT_OK((*set)->CaptureAll());
  ASSERT_OK((*tail)->PrepareBmm(problem->shape(), problem->buffers()));

  StreamGate gate;
  ASSERT_EQ(gate.Close(stream_), cudaSuccess);
  ASSERT_OK((*tail)->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm));
  ASSERT_OK((*set)->Replay(0, 16, stream_));
  // A destructor that waited for the queued work would wait for the gate: it opens by itself
  // after 3 s, so a waiting destructor shows as a slow one rather than a hang.
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    gate.Release();
  });
  auto seconds_of = [](const std::function<void()>& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double tail_seconds = seconds_of([&] { tail->reset(); });
  const double set_seconds = seconds_of([&] { set->reset(); });
  const bool still_queued = cudaStreamQuery(stream_) == cudaErrorNotReady;
  opener.join();
  // compute-sanitizer makes stream-ordered frees wait for the GPU: the timing is a plain-run
  // property; the work's correctness after destruction is checked under every tool.
  if (!SanitizerProfile()) {
    EXPECT_LT(tail_seconds, 1.0) << "~MlaTail waited for the GPU";
    EXPECT_LT(set_seconds, 1.0) << "~TailGraphSet waited for the GPU";
    EXPECT_TRUE(still_queued);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
  ASSERT_OK(problem->Check(second->as<mla_tail::bf16>(), problem->SampleRows(), true));
}

}  // namespace
}  // namespace mla_tail_testing

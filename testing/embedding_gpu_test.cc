// The tail inside a runtime's own graphs: nodes added to the caller's graph after an upstream
// kernel (with and without the programmatic edge), in-place updates of the caller's executable
// graph while earlier launches are queued, recording into the caller's capture (RecordTailNodes,
// TailGraphSet::Replay), every public call while another thread captures, destruction with work
// in flight, and the caller's CUDA error state.

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
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
#include "mla_tail/graph/tail_nodes.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "testing/gpu.h"
#include "testing/gpu_stream_test.h"
#include "testing/late_writer.h"
#include "testing/problem.h"
#include "testing/status_macros.h"

namespace mla_testing {
namespace {

using ::mla::TailPath;
using ::mla_graph::AddTailNodes;
using ::mla_graph::GraphSetOptions;
using ::mla_graph::RecordTailNodes;
using ::mla_graph::TailGraphSet;
using ::mla_graph::TailNodeOptions;
using ::mla_graph::TailNodes;
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
    mla::TailOptions options;
    options.max_rows = 64;
    absl::StatusOr<std::unique_ptr<mla::MlaTail>> tail = mla::MlaTail::Create(0, options);
    ASSERT_TRUE(tail.ok()) << tail.status();
    tail_ = *std::move(tail);
  }

  std::unique_ptr<Problem> MakeProblem(int heads, int rows, uint64_t seed,
                                       int inactive_every = 3) {
    ProblemOptions options;
    options.shape = {heads, rows, 1};
    options.seed = seed;
    options.inactive_every = inactive_every;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  absl::StatusOr<DeviceMemory> NewOutput(const Problem& problem) {
    absl::StatusOr<DeviceMemory> m =
        DeviceMemory::Allocate(problem.output_elements() * sizeof(uint16_t));
    if (!m.ok()) return m.status();
    if (absl::Status s = problem.PoisonOutput(m->as<mla::bf16>(), stream_); !s.ok()) return s;
    return m;
  }

  std::unique_ptr<mla::MlaTail> tail_;
};

// A problem whose latent, gate and lengths an upstream kernel writes late: before it, they hold
// NaN and zero lengths, so a tail that read them before its dependency wait shows it.
struct LateInputs {
  DeviceMemory saved;
  size_t latent_bytes = 0, gate_bytes = 0, lengths_bytes = 0;

  static absl::StatusOr<LateInputs> Save(const Problem& problem) {
    const mla::TailBuffers b = problem.buffers();
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
    const mla::TailBuffers b = problem.buffers();
    if (cudaMemsetAsync(const_cast<mla::bf16*>(b.latent), 0xff, latent_bytes, stream) ||
        cudaMemsetAsync(const_cast<mla::bf16*>(b.gate), 0xff, gate_bytes, stream) ||
        cudaMemsetAsync(const_cast<int32_t*>(b.lengths), 0, lengths_bytes, stream)) {
      return absl::InternalError("spoiling the inputs");
    }
    return absl::OkStatus();
  }

  // The upstream kernel: triggers its dependents at once, writes the inputs 50 us later.
  cudaError_t LaunchWriter(const Problem& problem, cudaStream_t stream) const {
    const mla::TailBuffers b = problem.buffers();
    const char* s = saved.as<char>();
    const LateCopy copies[3] = {
        {s, const_cast<mla::bf16*>(b.latent), latent_bytes},
        {s + latent_bytes, const_cast<mla::bf16*>(b.gate), gate_bytes},
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
    for (const auto [heads, rows] : {std::pair{12, 1}, {12, 16}, {12, 64}, {64, 1}, {64, 16}}) {
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
      absl::StatusOr<TailNodes> nodes = AddTailNodes(*tail_, graph, {*upstream},
                                                     problem->shape(), problem->buffers(),
                                                     options);
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
  absl::StatusOr<DeviceMemory> second_a = NewOutput(*a);
  ASSERT_TRUE(second_a.ok()) << second_a.status();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  absl::StatusOr<TailNodes> nodes = AddTailNodes(*tail_, graph, {}, a->shape(), a->buffers());
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
  ASSERT_OK(nodes->Update(exec, a->buffers_with_output(second_a->as<mla::bf16>())));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady);
  gate.Release();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(a->Check(a->buffers().output, a->SampleRows(), true));
  ASSERT_OK(b->Check(b->buffers().output, b->SampleRows(), true));
  ASSERT_OK(a->Check(second_a->as<mla::bf16>(), a->SampleRows(), true));

  // UpdateGraph rewrites the template: a new instantiation holds the new pointers.
  absl::StatusOr<DeviceMemory> third_a = NewOutput(*a);
  ASSERT_TRUE(third_a.ok());
  ASSERT_OK(nodes->UpdateGraph(a->buffers_with_output(third_a->as<mla::bf16>())));
  cudaGraphExec_t fresh = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&fresh, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(fresh, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(a->Check(third_a->as<mla::bf16>(), a->SampleRows(), true));
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
  EXPECT_EQ(AddTailNodes(*tail_, nullptr, {}, a->shape(), a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  mla::TailBuffers broken = a->buffers();
  broken.gate = nullptr;
  EXPECT_THAT(std::string(
                  AddTailNodes(*tail_, graph, {}, a->shape(), broken).status().message()),
              HasSubstr("gate is null"));
  EXPECT_EQ(AddTailNodes(*tail_, graph, {}, {0, 16, 1}, a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const cudaGraphNode_t null_node = nullptr;
  EXPECT_EQ(AddTailNodes(*tail_, graph, {null_node}, a->shape(), a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0u) << "a refused call added a node";

  absl::StatusOr<TailNodes> nodes = AddTailNodes(*tail_, graph, {}, a->shape(), a->buffers());
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

  // RecordTailNodes needs a capturing stream.
  const absl::Status not_capturing =
      RecordTailNodes(*tail_, stream_, a->shape(), a->buffers()).status();
  EXPECT_EQ(not_capturing.code(), absl::StatusCode::kFailedPrecondition) << not_capturing;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A runtime that captures its own step: RecordTailNodes records the tail after the upstream
// kernel with a programmatic edge, and its handle updates the runtime's executable graph.
TEST_F(EmbeddingGpuTest, RecordTailNodesIntoTheCallersCapture) {
  std::unique_ptr<Problem> problem = MakeProblem(64, 16, 51, 0);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<LateInputs> late = LateInputs::Save(*problem);
  ASSERT_TRUE(late.ok()) << late.status();
  absl::StatusOr<DeviceMemory> other = NewOutput(*problem);
  ASSERT_TRUE(other.ok());

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(late->LaunchWriter(*problem, stream_), cudaSuccess);
  absl::StatusOr<TailNodes> nodes =
      RecordTailNodes(*tail_, stream_, problem->shape(), problem->buffers());
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  cudaGraphEdgeData edge = {};
  cudaGraphNode_t dependency = nullptr;
  size_t count = 1;
  ASSERT_EQ(cudaGraphNodeGetDependencies(nodes->node(), &dependency, &edge, &count),
            cudaSuccess);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(edge.type, cudaGraphDependencyTypeProgrammatic);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (mla::bf16* output : {problem->buffers().output, other->as<mla::bf16>()}) {
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

INSTANTIATE_TEST_SUITE_P(
    PathsAndModes, ReplayInCaptureTest,
    ::testing::Combine(::testing::Values(TailPath::kFused, TailPath::kBmm),
                       ::testing::Values(cudaStreamCaptureModeGlobal,
                                         cudaStreamCaptureModeThreadLocal,
                                         cudaStreamCaptureModeRelaxed)),
    [](const auto& info) {
      const cudaStreamCaptureMode mode = std::get<1>(info.param);
      return absl::StrCat(mla::TailPathName(std::get<0>(info.param)),
                          mode == cudaStreamCaptureModeGlobal        ? "Global"
                          : mode == cudaStreamCaptureModeThreadLocal ? "ThreadLocal"
                                                                     : "Relaxed");
    });

// A thread that captures its own work in Global mode on a blocking stream while this thread
// calls every public entry point (creation with BMM scratch, eager runs, captures of graph sets,
// replays, exports, graph building, destruction): none of the calls fails, and the other
// thread's capture ends intact.
TEST_F(EmbeddingGpuTest, EveryCallIsSafeWhileAnotherThreadCaptures) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 61);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> scratch = DeviceMemory::Allocate(1 << 20);
  ASSERT_TRUE(scratch.ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  std::promise<void> capturing, done;
  std::shared_future<void> done_future = done.get_future().share();
  std::promise<cudaError_t> ended;
  std::thread other([&] {
    cudaSetDevice(0);
    cudaStream_t blocking = nullptr;
    cudaStreamCreate(&blocking);  // a blocking stream: legacy-stream work would join it
    cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal);
    cudaMemsetAsync(scratch->get(), 0, 1 << 20, blocking);
    capturing.set_value();
    done_future.wait();
    cudaMemsetAsync(scratch->get(), 1, 1 << 20, blocking);
    cudaGraph_t graph = nullptr;
    const cudaError_t e = cudaStreamEndCapture(blocking, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaStreamDestroy(blocking);
    ended.set_value(e);
  });
  capturing.get_future().wait();

  absl::Status status;
  {
    mla::TailOptions tail_options;
    tail_options.max_rows = 64;
    absl::StatusOr<std::unique_ptr<mla::MlaTail>> tail = mla::MlaTail::Create(0, tail_options);
    status.Update(tail.status());
    if (tail.ok()) {
      status.Update((*tail)->PrepareBmm(problem->shape(), problem->buffers()));
      status.Update((*tail)->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm));
      status.Update((*tail)->Run(problem->shape(), problem->buffers(), stream_));
      cudaGraph_t graph = nullptr;
      if (cudaGraphCreate(&graph, 0) == cudaSuccess) {
        status.Update(
            AddTailNodes(**tail, graph, {}, problem->shape(), problem->buffers()).status());
        cudaGraphDestroy(graph);
      }
    }
    for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
      GraphSetOptions options;
      options.heads = 12;
      options.layers = 2;
      options.buckets = {8, 16};
      options.path = path;
      absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
      status.Update(set.status());
      if (!set.ok()) continue;
      status.Update((*set)->SetLayer(0, problem->buffers()));
      status.Update((*set)->SetLayer(1, problem->buffers()));
      status.Update((*set)->Replay(0, 16, stream_));  // a lazy capture and instantiation
      status.Update((*set)->CaptureAll());
      status.Update((*set)->Replay(1, 8, stream_));
      absl::StatusOr<cudaGraph_t> exported = (*set)->ExportGraph(1, 16);
      status.Update(exported.status());
      if (exported.ok()) cudaGraphDestroy(*exported);
    }  // destroyed with their replays possibly still running
  }  // the tail too, its BMM run possibly still running
  done.set_value();
  const cudaError_t other_capture = ended.get_future().get();
  other.join();
  EXPECT_OK(status);
  EXPECT_EQ(other_capture, cudaSuccess)
      << "the other thread's capture broke: " << cudaGetErrorName(other_capture);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
}

// Destroying a tail or a graph set never waits for the GPU, and work they enqueued completes
// correctly after them (the BMM scratch is freed in stream order behind it).
TEST_F(EmbeddingGpuTest, DestructionWithWorkInFlight) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 71);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> second = NewOutput(*problem);
  ASSERT_TRUE(second.ok());
  ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));

  mla::TailOptions tail_options;
  tail_options.max_rows = 64;
  absl::StatusOr<std::unique_ptr<mla::MlaTail>> tail = mla::MlaTail::Create(0, tail_options);
  ASSERT_TRUE(tail.ok()) << tail.status();
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {16};
  options.path = TailPath::kBmm;
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, problem->buffers_with_output(second->as<mla::bf16>())));
  ASSERT_OK((*set)->CaptureAll());
  ASSERT_OK((*tail)->PrepareBmm(problem->shape(), problem->buffers()));

  StreamGate gate;
  ASSERT_EQ(gate.Close(stream_), cudaSuccess);
  ASSERT_OK((*tail)->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm));
  ASSERT_OK((*set)->Replay(0, 16, stream_));
  const auto start = std::chrono::steady_clock::now();
  tail->reset();
  set->reset();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "the destructors waited";
  EXPECT_LT(seconds, 5.0);
  gate.Release();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
  ASSERT_OK(problem->Check(second->as<mla::bf16>(), problem->SampleRows(), true));
}

// The library leaves the caller's CUDA error state alone: an error pending from the caller's own
// call stays pending through successful calls, and a failed call of the library's own leaves
// none behind.
TEST_F(EmbeddingGpuTest, TheCallersErrorStateIsKept) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 81);
  ASSERT_NE(problem, nullptr);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  void* huge = nullptr;
  ASSERT_EQ(cudaMalloc(&huge, size_t{1} << 50), cudaErrorMemoryAllocation);
  ASSERT_OK(tail_->Run(problem->shape(), problem->buffers(), stream_));
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {16};
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, problem->buffers()));
  ASSERT_OK((*set)->Replay(0, 16, stream_));
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation) << "the caller's error was cleared";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // The library's own failed CUDA call (a node that is not in the executable graph) reports an
  // Internal status carrying the CUDA error, and leaves no error pending.
  cudaGraph_t graph = nullptr, other_graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphCreate(&other_graph, 0), cudaSuccess);
  absl::StatusOr<TailNodes> nodes =
      AddTailNodes(*tail_, graph, {}, problem->shape(), problem->buffers());
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_TRUE(AddTailNodes(*tail_, other_graph, {}, problem->shape(), problem->buffers()).ok());
  cudaGraphExec_t other_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&other_exec, other_graph, 0), cudaSuccess);
  const absl::Status wrong_exec = nodes->Update(other_exec, problem->buffers());
  EXPECT_FALSE(wrong_exec.ok());
  EXPECT_TRUE(mla::CudaErrorOf(wrong_exec).has_value()) << wrong_exec;
  EXPECT_FALSE(mla::IsStickyCudaError(wrong_exec));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the library left its own error pending";
  cudaGraphExecDestroy(other_exec);
  cudaGraphDestroy(other_graph);
  cudaGraphDestroy(graph);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

}  // namespace
}  // namespace mla_testing

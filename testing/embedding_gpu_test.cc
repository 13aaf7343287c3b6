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

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/capture_on_another_thread.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/late_inputs.h"
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
using ::mla_tail_testing::CaptureOnAnotherThread;
using ::mla_tail_testing::LateCopy;
using ::mla_tail_testing::LaunchLateWriter;
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
      absl::StatusOr<LateInputs> late = LateInputs::Save(*problem, stream_);
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

// A kernel that writes W_UV late (a dequantization staged in the step: it lets its dependents
// launch at once, writes 50 us later), given in TailNodeOptions::full_edge_dependencies: the
// tail's edge from it is full, and every output equals the reference (the tail reads W_UV before
// its dependency wait; until the writer ends, W_UV holds NaN). The control, in the full profile (a
// sanitizer may not keep PDL's overlap): the same graph with a programmatic edge reads the NaN
// W_UV. Beside the inputs' late writer, the two writers independent, the edge from the weight
// writer is full and from the input writer programmatic, and the outputs equal the reference. A
// full-edge dependency that is not one of the dependencies is refused by name and adds nothing.
TEST_F(EmbeddingGpuTest, AWeightWriterGetsAFullEdge) {
  constexpr int kHeads = 12;
  std::unique_ptr<Problem> problem = MakeProblem(kHeads, 64, 41, 0);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<LateInputs> late = LateInputs::Save(*problem, stream_);
  ASSERT_TRUE(late.ok()) << late.status();
  const mla_tail::TailBuffers b = problem->buffers();
  // W_UV's span: the last head's last row ends it.
  const size_t w_bytes =
      (size_t(b.w_head_stride) * (kHeads - 1) + size_t(b.w_row_stride) * (mla_tail::kValueDim - 1) +
       mla_tail::kLatentDim) *
      2;
  const size_t padded = (w_bytes + 15) / 16 * 16;
  absl::StatusOr<DeviceMemory> saved = DeviceMemory::Allocate(padded + 16);
  ASSERT_TRUE(saved.ok()) << saved.status();
  char* const saved_w = saved->as<char>();
  char* const spare = saved_w + padded;  // the writer's two unused copies: 16 bytes onto themselves
  ASSERT_EQ(cudaMemsetAsync(spare, 0, 16, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(saved_w, b.w_uv, w_bytes, cudaMemcpyDeviceToDevice, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  void* const w_uv = const_cast<mla_tail::bf16*>(b.w_uv);
  const LateCopy copies[3] = {{saved_w, w_uv, w_bytes}, {spare, spare, 16}, {spare, spare, 16}};

  // Launches `exec` over NaN W_UV (and, with `late_inputs`, inputs that their writer restores
  // late), and checks the output.
  auto launch = [&](cudaGraphExec_t exec, bool late_inputs) -> absl::Status {
    if (cudaMemsetAsync(w_uv, 0xff, w_bytes, stream_) != cudaSuccess) {
      return absl::InternalError("cudaMemsetAsync");
    }
    if (late_inputs) {
      if (absl::Status s = late->Spoil(*problem, stream_); !s.ok()) return s;
    }
    if (absl::Status s = problem->PoisonOutput(b.output, stream_); !s.ok()) return s;
    if (cudaGraphLaunch(exec, stream_) != cudaSuccess) return absl::InternalError("launch");
    if (cudaStreamSynchronize(stream_) != cudaSuccess) return absl::InternalError("sync");
    return problem->Check(b.output, problem->SampleRows(), true);
  };

  {
    SCOPED_TRACE("the weight writer alone");
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(LaunchLateWriter(copies, 50000, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
    absl::Cleanup destroy_graph = [graph] { cudaGraphDestroy(graph); };
    cudaGraphNode_t writer = nullptr;
    size_t count = 1;
    ASSERT_EQ(cudaGraphGetNodes(graph, &writer, &count), cudaSuccess);
    ASSERT_EQ(count, 1u);
    if (!SanitizerProfile()) {
      SCOPED_TRACE("the control: a programmatic edge");
      cudaGraph_t control = nullptr;
      ASSERT_EQ(cudaGraphClone(&control, graph), cudaSuccess);
      absl::Cleanup destroy_control = [control] { cudaGraphDestroy(control); };
      cudaGraphNode_t cloned_writer = nullptr;
      ASSERT_EQ(cudaGraphNodeFindInClone(&cloned_writer, writer, control), cudaSuccess);
      ASSERT_OK(AddTailNode(*tail_, control, {cloned_writer}, problem->shape(), b).status());
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, control, 0), cudaSuccess);
      absl::Cleanup destroy_exec = [exec] { cudaGraphExecDestroy(exec); };
      EXPECT_FALSE(launch(exec, false).ok())
          << "the tail read W_UV only after its late writer with a programmatic edge: the test "
             "cannot tell the full edge from it";
    }
    TailNodeOptions options;
    options.full_edge_dependencies = {&writer, 1};
    absl::StatusOr<TailNode> node =
        AddTailNode(*tail_, graph, {writer}, problem->shape(), b, options);
    ASSERT_TRUE(node.ok()) << node.status();
    cudaGraphEdgeData edge = {};
    cudaGraphNode_t dependency = nullptr;
    count = 1;
    ASSERT_EQ(cudaGraphNodeGetDependencies(node->node(), &dependency, &edge, &count), cudaSuccess);
    ASSERT_EQ(count, 1u);
    EXPECT_NE(edge.type, cudaGraphDependencyTypeProgrammatic);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    absl::Cleanup destroy_exec = [exec] { cudaGraphExecDestroy(exec); };
    for (int round = 0; round < 2; ++round) ASSERT_OK(launch(exec, false));
  }

  SCOPED_TRACE("beside the inputs' writer");
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(LaunchLateWriter(copies, 50000, stream_), cudaSuccess);
  ASSERT_EQ(late->LaunchWriter(*problem, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  absl::Cleanup destroy_graph = [graph] { cudaGraphDestroy(graph); };
  size_t count = 2;
  cudaGraphNode_t nodes[2] = {};
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes, &count), cudaSuccess);
  ASSERT_EQ(count, 2u);
  size_t first_dependencies = 0;
  ASSERT_EQ(cudaGraphNodeGetDependencies(nodes[0], nullptr, nullptr, &first_dependencies),
            cudaSuccess);
  // The weight writer was captured first: it depends on nothing. The capture's edge between
  // them (a full one: the writers launch without PDL) is removed, else the input writer, and the
  // tail behind it, would start only once W_UV is written whatever the tail's edges.
  const cudaGraphNode_t weight_writer = first_dependencies == 0 ? nodes[0] : nodes[1];
  const cudaGraphNode_t input_writer = first_dependencies == 0 ? nodes[1] : nodes[0];
  ASSERT_EQ(cudaGraphRemoveDependencies(graph, &weight_writer, &input_writer, nullptr, 1),
            cudaSuccess);

  TailNodeOptions options;
  options.full_edge_dependencies = {&input_writer, 1};
  const absl::Status stranger =
      AddTailNode(*tail_, graph, {weight_writer}, problem->shape(), b, options).status();
  EXPECT_EQ(stranger.code(), absl::StatusCode::kInvalidArgument) << stranger;
  EXPECT_THAT(std::string(stranger.message()), HasSubstr("full_edge_dependencies[0]"));
  count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2u) << "a refused AddTailNode added a node";

  options.full_edge_dependencies = {&weight_writer, 1};
  absl::StatusOr<TailNode> node =
      AddTailNode(*tail_, graph, {input_writer, weight_writer}, problem->shape(), b, options);
  ASSERT_TRUE(node.ok()) << node.status();
  cudaGraphNode_t dependencies[2] = {};
  cudaGraphEdgeData edges[2] = {};
  count = 2;
  ASSERT_EQ(cudaGraphNodeGetDependencies(node->node(), dependencies, edges, &count), cudaSuccess);
  ASSERT_EQ(count, 2u);
  for (size_t i = 0; i < count; ++i) {
    SCOPED_TRACE(dependencies[i] == weight_writer ? "the weight writer" : "the input writer");
    EXPECT_EQ(edges[i].type == cudaGraphDependencyTypeProgrammatic,
              dependencies[i] == input_writer);
  }

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  absl::Cleanup destroy_exec = [exec] { cudaGraphExecDestroy(exec); };
  for (int round = 0; round < 2; ++round) ASSERT_OK(launch(exec, true));
}

// A node's handle in a clone of its graph (a runtime cloning a template step graph): the clone's
// executable graph runs what the graph held when it was cloned, its handle's Update points that
// graph at other buffers and the original's exec keeps its own; the original handle's Update of
// the clone's exec, and InClone of a graph that is no clone, are refused; an empty handle's
// InClone is FailedPrecondition.
TEST_F(EmbeddingGpuTest, AHandleFollowsItsNodeIntoAClone) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 43);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> other = problem->NewOutput(stream_);
  ASSERT_TRUE(other.ok()) << other.status();
  mla_tail::bf16* const other_output = other->as<mla_tail::bf16>();
  const mla_tail::TailBuffers first = problem->buffers();
  const mla_tail::TailBuffers second = problem->buffers_with_output(other_output);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  absl::Cleanup destroy_graph = [graph] { cudaGraphDestroy(graph); };
  absl::StatusOr<TailNode> node = AddTailNode(*tail_, graph, {}, problem->shape(), first);
  ASSERT_TRUE(node.ok()) << node.status();
  cudaGraph_t clone = nullptr;
  ASSERT_EQ(cudaGraphClone(&clone, graph), cudaSuccess);
  absl::Cleanup destroy_clone = [clone] { cudaGraphDestroy(clone); };
  absl::StatusOr<TailNode> cloned = node->InClone(clone);
  ASSERT_TRUE(cloned.ok()) << cloned.status();
  EXPECT_NE(cloned->node(), node->node());
  EXPECT_EQ(cloned->kernel(), node->kernel());

  cudaGraphExec_t exec = nullptr, clone_exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  absl::Cleanup destroy_exec = [exec] { cudaGraphExecDestroy(exec); };
  ASSERT_EQ(cudaGraphInstantiate(&clone_exec, clone, 0), cudaSuccess);
  absl::Cleanup destroy_clone_exec = [clone_exec] { cudaGraphExecDestroy(clone_exec); };
  auto launch = [&](cudaGraphExec_t e, mla_tail::bf16* written, mla_tail::bf16* untouched) {
    ASSERT_OK(problem->PoisonOutput(written, stream_));
    ASSERT_OK(problem->PoisonOutput(untouched, stream_));
    ASSERT_EQ(cudaGraphLaunch(e, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem->Check(written, problem->SampleRows(), true));
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(untouched, problem->output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    int64_t stray = 0;
    for (uint16_t bit : *bits) stray += bit != 0xffff;
    EXPECT_EQ(stray, 0) << "the other output was written";
  };
  {
    SCOPED_TRACE("the clone as cloned");
    launch(clone_exec, first.output, other_output);
  }
  ASSERT_OK(cloned->Update(clone_exec, second));
  {
    SCOPED_TRACE("the clone's exec updated through its handle");
    launch(clone_exec, other_output, first.output);
  }
  {
    SCOPED_TRACE("the original's exec as it was");
    launch(exec, first.output, other_output);
  }
  // CUDA itself refuses these two (the sanitizers would report its errors): the full profile.
  if (!SanitizerProfile()) {
    const absl::Status crossed = node->Update(clone_exec, first);
    EXPECT_EQ(crossed.code(), absl::StatusCode::kInvalidArgument) << crossed;
    cudaGraph_t stranger = nullptr;
    ASSERT_EQ(cudaGraphCreate(&stranger, 0), cudaSuccess);
    absl::Cleanup destroy_stranger = [stranger] { cudaGraphDestroy(stranger); };
    EXPECT_EQ(node->InClone(stranger).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(node->InClone(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TailNode().InClone(clone).status().code(), absl::StatusCode::kFailedPrecondition);
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
  const absl::Status null_graph =
      AddTailNode(*tail_, nullptr, {}, a->shape(), a->buffers()).status();
  EXPECT_EQ(null_graph.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(null_graph.message()), HasSubstr("graph is null"));
  mla_tail::TailBuffers broken = a->buffers();
  broken.lengths = nullptr;
  EXPECT_THAT(std::string(AddTailNode(*tail_, graph, {}, a->shape(), broken).status().message()),
              HasSubstr("lengths is null"));
  EXPECT_EQ(AddTailNode(*tail_, graph, {}, {0, 16, 1}, a->buffers()).status().code(),
            absl::StatusCode::kInvalidArgument);
  const cudaGraphNode_t null_node = nullptr;
  const absl::Status null_dependency =
      AddTailNode(*tail_, graph, {null_node}, a->shape(), a->buffers()).status();
  EXPECT_EQ(null_dependency.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(null_dependency.message()), HasSubstr("dependency 0 is null"));
  // A dependency given twice (CUDA would refuse the edge as a library fault).
  cudaGraphNode_t before = nullptr;
  ASSERT_EQ(cudaGraphAddEmptyNode(&before, graph, nullptr, 0), cudaSuccess);
  const absl::Status twice =
      AddTailNode(*tail_, graph, {before, before}, a->shape(), a->buffers()).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("given twice"));
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1u) << "a refused call added a node";

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
  absl::StatusOr<LateInputs> late = LateInputs::Save(*problem, stream_);
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

// The only node that depends on `upstream`, with the edge's data.
struct Dependent {
  cudaGraphNode_t node = nullptr;
  cudaGraphEdgeData edge = {};
};
absl::StatusOr<Dependent> OnlyDependent(cudaGraphNode_t upstream) {
  size_t count = 0;
  if (cudaGraphNodeGetDependentNodes(upstream, nullptr, nullptr, &count) != cudaSuccess ||
      count != 1) {
    return absl::InternalError(absl::StrCat("expected one dependent node, found ", count));
  }
  Dependent d;
  if (cudaGraphNodeGetDependentNodes(upstream, &d.node, &d.edge, &count) != cudaSuccess) {
    return absl::InternalError("cudaGraphNodeGetDependentNodes");
  }
  return d;
}

// The only root node of a graph.
absl::StatusOr<cudaGraphNode_t> OnlyRoot(cudaGraph_t graph) {
  size_t count = 0;
  if (cudaGraphGetRootNodes(graph, nullptr, &count) != cudaSuccess || count != 1) {
    return absl::InternalError(absl::StrCat("expected one root node, found ", count));
  }
  cudaGraphNode_t root = nullptr;
  if (cudaGraphGetRootNodes(graph, &root, &count) != cudaSuccess) {
    return absl::InternalError("cudaGraphGetRootNodes");
  }
  return root;
}

class PdlOptionTest : public GpuStreamTest<::testing::TestWithParam<bool>> {};

// TailOptions::pdl and GraphSetOptions::pdl decide the edge from the kernel before the tail:
// with them (the default) MlaTail::Run and TailGraphSet::Replay recorded in the caller's
// capture, on both paths, and AddTailNode put a programmatic edge there; without them, a full
// edge. Either way the graphs, and the eager launches after the same upstream kernel, compute
// the tail: that kernel triggers its dependents at once and writes latent, gate and lengths
// 50 us later.
TEST_P(PdlOptionTest, EdgeTypeAndResults) {
  const bool pdl = GetParam();
  const cudaGraphDependencyType expected =
      pdl ? cudaGraphDependencyTypeProgrammatic : cudaGraphDependencyTypeDefault;
  ProblemOptions problem_options;
  problem_options.shape = {12, 16, 1};
  problem_options.inactive_every = 0;
  problem_options.seed = 91;
  absl::StatusOr<std::unique_ptr<Problem>> created = Problem::Create(problem_options, stream_);
  ASSERT_TRUE(created.ok()) << created.status();
  const Problem& problem = **created;
  const mla_tail::TailBuffers b = problem.buffers();
  absl::StatusOr<LateInputs> late = LateInputs::Save(problem, stream_);
  ASSERT_TRUE(late.ok()) << late.status();

  mla_tail::TailOptions tail_options;
  tail_options.max_rows = 64;
  tail_options.pdl = pdl;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
      mla_tail::MlaTail::Create(0, tail_options);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ((*tail)->options().pdl, pdl);
  ASSERT_OK((*tail)->PrepareBmm(problem.shape(), b));
  std::unique_ptr<TailGraphSet> sets[2];
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    GraphSetOptions options;
    options.heads = 12;
    options.layers = 1;
    options.buckets = {16};
    options.path = path;
    options.pdl = pdl;
    absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
    ASSERT_TRUE(set.ok()) << set.status();
    ASSERT_OK((*set)->SetLayer(0, b));
    ASSERT_OK((*set)->CaptureAll());
    sets[path == TailPath::kBmm] = *std::move(set);
  }
  auto expect_computed = [&](const char* what) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << what;
    SCOPED_TRACE(what);
    EXPECT_OK(problem.Check(b.output, problem.SampleRows(), true));
  };

  const std::pair<const char*, std::function<absl::Status()>> recorders[] = {
      {"MlaTail::Run (fused)",
       [&] { return (*tail)->Run(problem.shape(), b, stream_, TailPath::kFused); }},
      {"MlaTail::Run (BMM)",
       [&] { return (*tail)->Run(problem.shape(), b, stream_, TailPath::kBmm); }},
      {"TailGraphSet::Replay (fused)", [&] { return sets[0]->Replay(0, 16, stream_); }},
      {"TailGraphSet::Replay (BMM)", [&] { return sets[1]->Replay(0, 16, stream_); }},
  };
  for (const auto& [name, record] : recorders) {
    SCOPED_TRACE(name);
    // Recorded into the caller's capture after the upstream kernel.
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(late->LaunchWriter(problem, stream_), cudaSuccess);
    const absl::Status recorded = record();
    ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
    ASSERT_OK(recorded);
    absl::StatusOr<cudaGraphNode_t> upstream = OnlyRoot(graph);
    ASSERT_TRUE(upstream.ok()) << upstream.status();
    absl::StatusOr<Dependent> first = OnlyDependent(*upstream);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->edge.type, expected);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_OK(late->Spoil(problem, stream_));
    ASSERT_OK(problem.PoisonOutput(b.output, stream_));
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    expect_computed("the recorded graph");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    // The same call launched eagerly after the upstream kernel.
    ASSERT_OK(late->Spoil(problem, stream_));
    ASSERT_OK(problem.PoisonOutput(b.output, stream_));
    ASSERT_EQ(late->LaunchWriter(problem, stream_), cudaSuccess);
    ASSERT_OK(record());
    expect_computed("launched after the upstream kernel");
  }

  // AddTailNode after the upstream kernel's node, asking for the programmatic edge (the default):
  // it is programmatic only where the MlaTail launches with PDL.
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(late->LaunchWriter(problem, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  absl::StatusOr<cudaGraphNode_t> upstream = OnlyRoot(graph);
  ASSERT_TRUE(upstream.ok()) << upstream.status();
  absl::StatusOr<TailNode> node = AddTailNode(**tail, graph, {*upstream}, problem.shape(), b);
  ASSERT_TRUE(node.ok()) << node.status();
  absl::StatusOr<Dependent> added = OnlyDependent(*upstream);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->node, node->node());
  EXPECT_EQ(added->edge.type, expected);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_OK(late->Spoil(problem, stream_));
  ASSERT_OK(problem.PoisonOutput(b.output, stream_));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  expect_computed("AddTailNode");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

INSTANTIATE_TEST_SUITE_P(Pdl, PdlOptionTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "WithPdl" : "WithoutPdl");
                         });

// While another thread captures, every public entry point (creation, BMM preparation with its
// allocations, eager runs, graph building, graph-set creation, lazy and ahead-of-time captures,
// replays, exports, destruction with work in flight) succeeds and leaves that capture intact.
// Each call runs during a capture of its own, so that a failure names the call, with the output
// poisoned before it: after it the output holds the tail where the call launches it, and is
// untouched where the call launches nothing (a Replay or Run that launched nothing fails).
TEST_F(EmbeddingGpuTest, EveryCallIsSafeWhileAnotherThreadCaptures) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 61);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> scratch = DeviceMemory::Allocate(4096);
  ASSERT_TRUE(scratch.ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const mla_tail::TailBuffers b = problem->buffers();
  enum class Launches { kNothing, kTheTail };
  auto during_capture = [&](const char* call, Launches launches,
                            const std::function<absl::Status()>& run) {
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    CaptureOnAnotherThread other(scratch->get());
    const absl::Status status = run();
    const cudaError_t ended = other.Finish();
    EXPECT_TRUE(status.ok()) << call << ": " << status;
    EXPECT_EQ(ended, cudaSuccess) << call
                                  << " broke another thread's capture: " << cudaGetErrorName(ended);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess) << call;
    if (launches == Launches::kTheTail) {
      SCOPED_TRACE(call);
      EXPECT_OK(problem->Check(b.output, problem->SampleRows(), true));
      return;
    }
    absl::StatusOr<std::vector<uint16_t>> bits = DownloadBits(b.output, problem->output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    int64_t written = 0;
    for (uint16_t bit : *bits) written += bit != 0xffff;
    EXPECT_EQ(written, 0) << call << " wrote the output";
  };

  std::unique_ptr<mla_tail::MlaTail> tail;
  during_capture("MlaTail::Create", Launches::kNothing, [&] {
    mla_tail::TailOptions options;
    options.max_rows = 64;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> created =
        mla_tail::MlaTail::Create(0, options);
    if (created.ok()) tail = *std::move(created);
    return created.status();
  });
  ASSERT_NE(tail, nullptr);
  during_capture("MlaTail::PrepareBmm", Launches::kNothing,
                 [&] { return tail->PrepareBmm(problem->shape(), b); });
  during_capture("MlaTail::Run (BMM)", Launches::kTheTail,
                 [&] { return tail->Run(problem->shape(), b, stream_, TailPath::kBmm); });
  during_capture("MlaTail::Run (fused)", Launches::kTheTail,
                 [&] { return tail->Run(problem->shape(), b, stream_); });
  during_capture("AddTailNode", Launches::kNothing, [&] {
    cudaGraph_t graph = nullptr;
    if (cudaGraphCreate(&graph, 0) != cudaSuccess) return absl::InternalError("cudaGraphCreate");
    const absl::Status added = AddTailNode(*tail, graph, {}, problem->shape(), b).status();
    cudaGraphDestroy(graph);
    return added;
  });
  {
    // The per-step calls of a runtime's own step graph: node updates in the executable graph and
    // in the graph, then the step launched (the graph made and instantiated beforehand).
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
    const absl::Cleanup destroy_graph = [&] { cudaGraphDestroy(graph); };
    mla_tail::TailBuffers ungated = b;
    ungated.gate = nullptr;
    absl::StatusOr<TailNode> node = AddTailNode(*tail, graph, {}, problem->shape(), ungated);
    ASSERT_TRUE(node.ok()) << node.status();
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    const absl::Cleanup destroy_exec = [&] { cudaGraphExecDestroy(exec); };
    during_capture("TailNode::Update, UpdateGraph, MlaTail::CheckStream", Launches::kTheTail, [&] {
      absl::Status status = node->Update(exec, b);  // the gated kernel
      status.Update(node->UpdateGraph(b));
      status.Update(tail->CheckStream(stream_));
      if (status.ok() && cudaGraphLaunch(exec, stream_) != cudaSuccess) {
        status = absl::InternalError("cudaGraphLaunch");
      }
      return status;
    });
  }
  during_capture("~MlaTail (BMM run in flight)", Launches::kTheTail, [&] {
    const absl::Status run = tail->Run(problem->shape(), b, stream_, TailPath::kBmm);
    tail.reset();
    return run;
  });
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    SCOPED_TRACE(mla_tail::TailPathName(path));
    std::unique_ptr<TailGraphSet> set;
    during_capture("TailGraphSet::Create", Launches::kNothing, [&] {
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
    during_capture("TailGraphSet::SetLayer", Launches::kNothing, [&] {
      absl::Status status = set->SetLayer(0, b);
      status.Update(set->SetLayer(1, b));
      return status;
    });
    during_capture("TailGraphSet::Replay (lazy capture)", Launches::kTheTail,
                   [&] { return set->Replay(0, 16, stream_); });
    EXPECT_EQ(set->stats().graphs_captured, 1);
    during_capture("TailGraphSet::CaptureAll", Launches::kNothing,
                   [&] { return set->CaptureAll(); });
    EXPECT_EQ(set->stats().graphs_captured, 4);
    during_capture("TailGraphSet::BucketRows, Replay", Launches::kTheTail, [&] {
      absl::StatusOr<int> bucket = set->BucketRows(12);
      if (!bucket.ok()) return bucket.status();
      if (*bucket != 16) return absl::InternalError(absl::StrCat("bucket ", *bucket));
      return set->Replay(1, 16, stream_);
    });
    during_capture("TailGraphSet::ExportGraph", Launches::kNothing, [&] {
      absl::StatusOr<cudaGraph_t> exported = set->ExportGraph(1, 16);
      if (exported.ok()) cudaGraphDestroy(*exported);
      return exported.status();
    });
    EXPECT_EQ(set->stats().replays, 2);
    during_capture("~TailGraphSet (replay in flight)", Launches::kTheTail, [&] {
      const absl::Status replayed = set->Replay(0, 16, stream_);
      set.reset();
      return replayed;
    });
  }
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

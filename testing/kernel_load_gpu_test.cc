// MlaTail::Create loads every kernel the tail launches (docs/spec.md), so that none is loaded
// during a decode step or on a device the runtime has filled since: after Create, and before
// anything is launched, each kernel a tail's launches and graph nodes use reads as loaded
// (cuFuncIsLoaded), where a kernel nothing launched reads as not loaded (CUDA loads lazily).
// Then a runtime fills the device (its KV cache): every fused kernel still runs, eagerly and
// through graphs, and once memory is back its graphs instantiate and replay. Alone in its binary,
// so that no earlier test has loaded a kernel for it.

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/device_filler.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/kernel_state.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::FusedKernel;

// The kernel a graph's kernel node launches.
const void* NodeKernel(cudaGraphNode_t node) {
  cudaKernelNodeParams params = {};
  if (cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess) return nullptr;
  return params.func;
}

std::string KernelName(const void* function) {
  const char* name = nullptr;
  return cudaFuncGetName(&name, function) == cudaSuccess && name != nullptr ? name : "?";
}

class KernelLoadGpuTest : public GpuStreamTest<> {
 protected:
  // After Create and before any launch, every kernel that `tails` (one per fused kernel) and the
  // BMM path use is loaded. The kernels are found through the public API: AddTailNode at heads x
  // rows that reach each form of a kernel (ColumnSplit's and LatentSplit's block heights, the
  // persistent kernel's rounds), and the first and last kernel nodes of a captured BMM run (its
  // operand tables and its gate). Neither building a node nor asking loads a kernel: the control,
  // a kernel nothing launches, built into a node the same way, reads as not loaded.
  void ExpectCreateLoadedEveryKernel(
      const std::vector<std::pair<FusedKernel, std::unique_ptr<mla_tail::MlaTail>>>& tails) {
    // compute-sanitizer may load what it instruments itself: under the sanitizer profile the
    // control is recorded, not required (the plain run requires it).
    bool lazy = false;
    ASSERT_EQ(LazyLoading(&lazy), cudaSuccess);
    RecordProperty("lazy_loading", lazy ? "yes" : "no");
    if (!SanitizerProfile()) {
      ASSERT_TRUE(lazy)
          << "CUDA loads kernels eagerly here (CUDA_MODULE_LOADING): this test cannot "
             "tell whether MlaTail::Create loads them; run it with lazy loading, CUDA's "
             "default";
    }
    cudaGraph_t scratch = nullptr;
    ASSERT_EQ(cudaGraphCreate(&scratch, 0), cudaSuccess);
    int* unused = nullptr;
    void* control_arguments[] = {&unused};
    cudaKernelNodeParams control = {};
    control.func = const_cast<void*>(NeverLaunchedKernel());
    control.gridDim = dim3(1);
    control.blockDim = dim3(1);
    control.kernelParams = control_arguments;
    cudaGraphNode_t control_node = nullptr;
    ASSERT_EQ(cudaGraphAddKernelNode(&control_node, scratch, nullptr, 0, &control), cudaSuccess);
    bool loaded = true;
    ASSERT_EQ(KernelIsLoaded(NodeKernel(control_node), &loaded), cudaSuccess);
    RecordProperty("control_kernel_loaded", loaded ? "yes" : "no");
    if (!SanitizerProfile()) {
      EXPECT_FALSE(loaded) << "the control kernel reads as loaded: building a node or asking "
                              "loads kernels, so this test cannot tell what Create loaded";
    }

    // Buffers for every shape below; only their addresses matter (nothing is launched).
    ProblemOptions problem_options;
    problem_options.shape = {128, 1000, 1};
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(problem_options, stream_);
    ASSERT_TRUE(problem.ok()) << problem.status();
    const mla_tail::TailBuffers b = (*problem)->buffers();

    mla_tail::TailOptions rule_options;
    rule_options.max_heads = 12;
    rule_options.max_rows = 64;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> rule =
        mla_tail::MlaTail::Create(0, rule_options);
    ASSERT_TRUE(rule.ok()) << rule.status();

    std::map<const void*, std::string> kernels;  // kernel -> where it was found
    for (const auto& [unused_kernel, tail] : tails) {
      for (int heads : {1, 12, 64, 128}) {
        for (int rows : {1, 5, 8, 9, 16, 17, 32, 33, 64, 100, 128, 256, 1000}) {
          const mla_tail::TailShape shape{heads, rows, 1};
          absl::StatusOr<mla_tail::TailNode> node =
              mla_tail::AddTailNode(*tail, scratch, {}, shape, b);
          ASSERT_TRUE(node.ok()) << node.status();
          const void* kernel = NodeKernel(node->node());
          ASSERT_NE(kernel, nullptr);
          kernels.emplace(
              kernel, absl::StrCat(mla_tail::FusedKernelName(tail->options().fused_kernel), " at ",
                                   heads, " x ", rows));
        }
      }
    }
    // The BMM path: its first and last kernel nodes, recorded from a capture.
    const mla_tail::TailShape bmm_shape{12, 64, 1};
    ASSERT_OK((*rule)->PrepareBmm(bmm_shape, b));
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const absl::Status recorded = (*rule)->Run(bmm_shape, b, stream_, mla_tail::TailPath::kBmm);
    cudaGraph_t bmm = nullptr;
    ASSERT_EQ(cudaStreamEndCapture(stream_, &bmm), cudaSuccess);
    ASSERT_OK(recorded);
    size_t count = 0;
    ASSERT_EQ(cudaGraphGetNodes(bmm, nullptr, &count), cudaSuccess);
    std::vector<cudaGraphNode_t> nodes(count);
    ASSERT_EQ(cudaGraphGetNodes(bmm, nodes.data(), &count), cudaSuccess);
    int ends = 0;
    for (cudaGraphNode_t node : nodes) {
      size_t in = 0, out = 0;
      ASSERT_EQ(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &in), cudaSuccess);
      ASSERT_EQ(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &out), cudaSuccess);
      if (in != 0 && out != 0) continue;  // cuBLASLt's own kernels lie between
      const void* kernel = NodeKernel(node);
      ASSERT_NE(kernel, nullptr);
      kernels.emplace(kernel, in == 0 ? "the BMM path's first node" : "the BMM path's last node");
      ++ends;
    }
    EXPECT_EQ(ends, 2);
    cudaGraphDestroy(bmm);

    RecordProperty("kernels", static_cast<int>(kernels.size()));
    for (const auto& [kernel, where] : kernels) {
      bool is_loaded = false;
      ASSERT_EQ(KernelIsLoaded(kernel, &is_loaded), cudaSuccess) << where;
      EXPECT_TRUE(is_loaded) << KernelName(kernel) << " (" << where
                             << ") was not loaded by MlaTail::Create";
    }
    cudaGraphDestroy(scratch);
    // The BMM scratch goes back in stream order; the device fills only once it is back.
    rule->reset();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  // Captures `tail`'s fused tail into a graph and instantiates it.
  cudaError_t Instantiate(mla_tail::MlaTail& tail, const Problem& problem, cudaGraphExec_t* exec) {
    cudaError_t e = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return e;
    const absl::Status run =
        tail.Run(problem.shape(), problem.buffers(), stream_, mla_tail::TailPath::kFused);
    cudaGraph_t graph = nullptr;
    e = cudaStreamEndCapture(stream_, &graph);
    EXPECT_TRUE(run.ok()) << run;
    if (e != cudaSuccess) return e;
    e = cudaGraphInstantiate(exec, graph, 0);
    cudaGraphDestroy(graph);
    return e;
  }
};

// With every fused kernel's MlaTail created first and the device then full: instantiating a
// graph of each either works or fails for want of memory, and the eager tail runs and is right;
// once memory is back, each graph instantiates, replays and is right.
TEST_F(KernelLoadGpuTest, FusedKernelsRunWithTheDeviceFullAndAfter) {
  ProblemOptions problem_options;
  problem_options.shape = {12, 100, 1};
  absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(problem_options, stream_);
  ASSERT_TRUE(problem.ok()) << problem.status();
  const mla_tail::TailBuffers b = (*problem)->buffers();

  std::vector<std::pair<FusedKernel, std::unique_ptr<mla_tail::MlaTail>>> tails;
  for (FusedKernel kernel : mla_tail::kFusedKernels) {
    mla_tail::TailOptions options;
    options.max_heads = 12;
    options.max_rows = 100;
    options.workspace_bytes = 0;
    options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    ASSERT_TRUE(tail.ok()) << tail.status();
    tails.emplace_back(kernel, *std::move(tail));
  }
  ExpectCreateLoadedEveryKernel(tails);
  if (HasFatalFailure()) return;
  // The test's own poisoning kernel loads here, before the device fills.
  ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  DeviceFiller filler;
  // Under the sanitizers, 256 MiB stay free for the tool's own tracking of each launch.
  RecordProperty("bytes_filled",
                 std::to_string(filler.Fill(ForProfile<size_t>(0, size_t{256} << 20))));
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  RecordProperty("bytes_free_after_fill", std::to_string(free_bytes));
  int instantiated_full = 0;
  for (const auto& [kernel, tail] : tails) {
    SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), ", device full"));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = Instantiate(*tail, **problem, &exec);
    EXPECT_TRUE(e == cudaSuccess || e == cudaErrorMemoryAllocation) << cudaGetErrorString(e);
    if (e == cudaSuccess) {
      ++instantiated_full;
      cudaGraphExecDestroy(exec);
    }
    cudaGetLastError();
    ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
    ASSERT_OK(tail->Run((*problem)->shape(), b, stream_, mla_tail::TailPath::kFused));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), /*exact=*/true));
  }
  RecordProperty("graphs_instantiated_while_full", instantiated_full);

  filler.Release();
  for (const auto& [kernel, tail] : tails) {
    SCOPED_TRACE(absl::StrCat(mla_tail::FusedKernelName(kernel), ", memory back"));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = Instantiate(*tail, **problem, &exec);
    ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e);
    ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    cudaGraphExecDestroy(exec);
    ASSERT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), /*exact=*/true));
  }
}

}  // namespace
}  // namespace mla_tail_testing

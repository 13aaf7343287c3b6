// A runtime fills the device (its KV cache) after creating the tail: every fused kernel still
// runs, eagerly and through graphs, and once memory is back its graphs instantiate and replay.
// MlaTail::Create loads every kernel (LoadTailKernels, mla/kernels/launch.h), so none is
// loaded on the full device. Alone in its binary, so that no earlier test has loaded a kernel
// for it. (On an H200 it passes without that loading too: the test guards it, it does not prove
// it necessary.)

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla/kernels/launch.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/device_filler.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::FusedKernel;

class KernelLoadGpuTest : public GpuStreamTest<> {
 protected:
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
    ASSERT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), /*exact=*/false));
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
    ASSERT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), /*exact=*/false));
  }
}

}  // namespace
}  // namespace mla_tail_testing

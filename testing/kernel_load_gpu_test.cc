// MlaTail::Create loads every kernel of the tail (PrepareTailKernels, mla/kernels/params.h). A
// runtime that fills the device after creating it, as it fills it with its KV cache, still runs
// every fused kernel: CUDA loads kernels lazily at their first use otherwise, and a load that
// finds no memory leaves the kernel unusable for the rest of the process. Alone in its binary,
// so that no earlier test has loaded a kernel for it.

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "mla/kernels/params.h"
#include "mla/tail.h"
#include "testing/device_filler.h"
#include "testing/gpu.h"
#include "testing/gpu_stream_test.h"
#include "testing/problem.h"
#include "testing/status_macros.h"

namespace mla_testing {
namespace {

using ::mla::MlaValueVariant;

class KernelLoadGpuTest : public GpuStreamTest<> {};

TEST_F(KernelLoadGpuTest, FusedKernelsRunWithTheDeviceFull) {
  ProblemOptions problem_options;
  problem_options.shape = {12, 100, 1};
  absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(problem_options, stream_);
  ASSERT_TRUE(problem.ok()) << problem.status();
  const mla::TailBuffers b = (*problem)->buffers();

  std::vector<std::pair<MlaValueVariant, std::unique_ptr<mla::MlaTail>>> tails;
  for (MlaValueVariant variant : mla::kMlaValueKernels) {
    mla::TailOptions options;
    options.max_heads = 12;
    options.max_rows = 100;
    options.workspace_bytes = 0;
    options.fused_variant = variant;
    absl::StatusOr<std::unique_ptr<mla::MlaTail>> tail = mla::MlaTail::Create(0, options);
    ASSERT_TRUE(tail.ok()) << tail.status();
    tails.emplace_back(variant, *std::move(tail));
  }
  // The test's own poisoning kernel loads here, before the device fills.
  ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  DeviceFiller filler;
  RecordProperty("bytes_filled", std::to_string(filler.Fill()));
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  RecordProperty("bytes_free_after_fill", std::to_string(free_bytes));

  for (const auto& [variant, tail] : tails) {
    SCOPED_TRACE(mla::MlaValueVariantName(variant));
    ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
    ASSERT_OK(tail->Run((*problem)->shape(), b, stream_, mla::TailPath::kFused));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), /*exact=*/false));
  }
}

}  // namespace
}  // namespace mla_testing

// Reliability on the GPU: the programmatic-dependency contract under an upstream kernel that
// writes the tail's inputs late, and separate instances driven from several threads at once.

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla/internal/cuda_status.h"
#include "mla/kernels/params.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/late_inputs.h"
#include "testing/support/late_writer.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::TailPath;

class ReliabilityGpuTest : public mla_tail_testing::GpuStreamTest<> {
 protected:
  // A tail of up to 64 rows whose fused path runs `kernel`.
  static std::unique_ptr<mla_tail::MlaTail> MakeTail(mla_tail::FusedKernel kernel) {
    mla_tail::TailOptions options;
    options.max_rows = 64;
    options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    EXPECT_TRUE(tail.ok()) << tail.status();
    return tail.ok() ? *std::move(tail) : nullptr;
  }
};

// The control: a minimal PDL-launched copy after the late writer sees the late writes. The tail
// tests below rely on this ordering; a tool that breaks it fails here as well as there.
TEST_F(ReliabilityGpuTest, ControlPdlWaitSeesLateWrites) {
  constexpr size_t kBytes = 64 << 10;
  absl::StatusOr<DeviceMemory> memory = DeviceMemory::Allocate(4 * kBytes);
  ASSERT_TRUE(memory.ok()) << memory.status();
  char* source = memory->as<char>();
  char* zeros = source + kBytes;
  char* target = source + 2 * kBytes;
  char* seen = source + 3 * kBytes;
  // Every set-up write on the test's stream: a cudaMemset of device memory returns before it has
  // written, and its legacy stream is not ordered with the non-blocking stream the kernels use.
  ASSERT_EQ(cudaMemsetAsync(source, 0x5a, kBytes, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(zeros, 0, kBytes, stream_), cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(cudaMemsetAsync(target, 0, kBytes, stream_), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(seen, 0, kBytes, stream_), cudaSuccess);
    const LateCopy copies[3] = {{source, target, kBytes}, {zeros, zeros, 16}, {zeros, zeros, 16}};
    ASSERT_EQ(LaunchLateWriter(copies, 50000, stream_), cudaSuccess);
    ASSERT_EQ(LaunchWaitingCopy({target, seen, kBytes}, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(reinterpret_cast<const mla_tail::bf16*>(seen), kBytes / 2);
    ASSERT_TRUE(bits.ok()) << bits.status();
    int stale = 0;
    for (uint16_t b : *bits) stale += b != 0x5a5a;
    ASSERT_EQ(stale, 0) << "the PDL-launched copy ran before the upstream kernel's writes";
  }
}

// The upstream kernel triggers launch_dependents at once and writes latent, gate and lengths
// 50 us later; before that they hold NaN and zero lengths. A tail that read any of them before
// griddepcontrol.wait would produce NaN or zero rows. Every fused kernel and the BMM path, at
// 64 rows and at 5-13 (ColumnSplit's 8-row blocks, which load the latent into registers). Three
// rounds each, one in the sanitizer profile.
TEST_F(ReliabilityGpuTest, InputsWrittenUpstreamUntilItsEndAreSeen) {
  using mla_tail::FusedKernel;
  std::vector<std::pair<TailPath, FusedKernel>> runs;
  for (FusedKernel v : mla_tail::kFusedKernels) runs.push_back({TailPath::kFused, v});
  runs.push_back({TailPath::kBmm, FusedKernel::kAuto});
  for (const auto& [path, kernel] : runs) {
    for (const auto& [heads, rows] :
         {std::pair{3, 64}, {12, 64}, {64, 64}, {12, 8}, {64, 5}, {12, 13}}) {
      SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), " ",
                                mla_tail::FusedKernelName(kernel), " heads ", heads, " rows ",
                                rows));
      ProblemOptions options;
      options.shape = {heads, rows, 1};
      options.inactive_every = 0;
      absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
      ASSERT_TRUE(problem.ok()) << problem.status();
      absl::StatusOr<LateInputs> late = LateInputs::Save(**problem, stream_);
      ASSERT_TRUE(late.ok()) << late.status();
      const mla_tail::TailBuffers b = late->buffers(**problem);
      std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(kernel);
      ASSERT_NE(tail, nullptr);
      ASSERT_OK(tail->PrepareBmm((*problem)->shape(), b));
      for (int round = 0; round < ForProfile(3, 1); ++round) {
        ASSERT_OK(late->Spoil(**problem, stream_));
        ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
        ASSERT_EQ(late->LaunchWriter(**problem, stream_), cudaSuccess);
        ASSERT_OK(tail->Run((*problem)->shape(), b, stream_, path));
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        ASSERT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), true));
      }
    }
  }
}

// The live row count written late as well: the upstream kernel triggers launch_dependents at
// once and writes the latent, gate, lengths and count n 50 us later. Until then the count is
// wrong, 0 in one round and B in the other, and the rest NaN and zero lengths. With the count read
// after the wait (row_count_before_upstream unset) and with the rows past it readable
// (rows_past_count_readable: latent, gate and lengths loaded beside the count, still after the
// wait), gated and not, every fused kernel and the BMM path at the shapes above: a count read
// before the wait leaves the live rows unwritten (0) or writes rows past n (B). Output rows past
// n must keep their NaN, rows below it equal the reference.
TEST_F(ReliabilityGpuTest, ACountWrittenUpstreamUntilItsEndIsSeen) {
  using mla_tail::FusedKernel;
  std::vector<std::pair<TailPath, FusedKernel>> runs;
  for (FusedKernel v : mla_tail::kFusedKernels) runs.push_back({TailPath::kFused, v});
  runs.push_back({TailPath::kBmm, FusedKernel::kAuto});
  std::vector<std::unique_ptr<mla_tail::MlaTail>> tails;
  for (const auto& [path, kernel] : runs) {
    tails.push_back(MakeTail(kernel));
    ASSERT_NE(tails.back(), nullptr);
  }
  for (const auto& [heads, rows] : ForProfile<std::pair<int, int>>(
           {{3, 64}, {12, 64}, {64, 64}, {12, 8}, {64, 5}, {12, 13}}, {{12, 13}})) {
    const int live = rows / 2 + 1;
    for (bool gated : {true, false}) {
      SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, " row count ", live,
                                gated ? " gated" : " no gate"));
      ProblemOptions options;
      options.shape = {heads, rows, 1};
      options.inactive_every = 0;
      options.gated = gated;
      absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
      ASSERT_TRUE(problem.ok()) << problem.status();
      absl::StatusOr<LateInputs> late = LateInputs::SaveWithCount(**problem, live, stream_);
      ASSERT_TRUE(late.ok()) << late.status();
      std::vector<int> sample = (*problem)->SampleRows();
      sample.push_back(live - 1);
      for (bool readable : {false, true}) {
        mla_tail::TailBuffers b = late->buffers(**problem);
        ASSERT_NE(b.row_count, nullptr);
        ASSERT_FALSE(b.row_count_before_upstream);
        b.rows_past_count_readable = readable;
        for (size_t i = 0; i < runs.size(); ++i) {
          const auto& [path, kernel] = runs[i];
          SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), " ",
                                    mla_tail::FusedKernelName(kernel),
                                    readable ? ", rows past the count readable" : ""));
          if (path == TailPath::kBmm) ASSERT_OK(tails[i]->PrepareBmm((*problem)->shape(), b));
          for (int spoiled : {0, rows}) {
            SCOPED_TRACE(absl::StrCat("count ", spoiled, " until the upstream kernel writes it"));
            ASSERT_OK(late->Spoil(**problem, stream_, spoiled));
            ASSERT_OK((*problem)->PoisonOutput(b.output, stream_));
            ASSERT_EQ(late->LaunchWriter(**problem, stream_), cudaSuccess);
            ASSERT_OK(tails[i]->Run((*problem)->shape(), b, stream_, path));
            ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
            ASSERT_OK((*problem)->Check(b.output, sample, true, live));
          }
        }
      }
    }
  }
}

// Separate graph sets, one per thread, each on its own stream, replay for a bounded time with
// pointers switching between two problems; every result is compared bit for bit with the
// verified output of its problem. Four threads cover both paths at both head counts; the
// sanitizer profile keeps them and shortens the run.
TEST_F(ReliabilityGpuTest, SeparateInstancesFromManyThreads) {
  constexpr int kThreads = 4;
  const auto kDuration = std::chrono::milliseconds(ForProfile(1500, 200));
  const int kMinReplays = ForProfile(10, 3);
  std::atomic<int> failures{0};
  std::atomic<int64_t> replays{0};
  auto worker = [&](int index) {
    auto fail = [&](const std::string& what) {
      if (failures++ < 5) ADD_FAILURE() << "thread " << index << ": " << what;
    };
    cudaStream_t stream;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
      return fail("stream");
    }
    const int heads = index % 2 == 0 ? 12 : 64;
    std::unique_ptr<Problem> problems[2];
    std::vector<uint16_t> expected[2];
    for (int p = 0; p < 2; ++p) {
      ProblemOptions options;
      options.shape = {heads, 32, 1};
      options.seed = 1000 + index * 10 + p;
      absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream);
      if (!problem.ok()) return fail(problem.status().ToString());
      problems[p] = *std::move(problem);
    }
    mla_tail::GraphSetOptions options;
    options.heads = heads;
    options.layers = 2;
    options.buckets = {8, 32};
    options.path = index % 4 < 2 ? TailPath::kFused : TailPath::kBmm;
    absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
        mla_tail::TailGraphSet::Create(0, options);
    if (!set.ok()) return fail(set.status().ToString());
    for (int p = 0; p < 2; ++p) {
      const mla_tail::TailBuffers b = problems[p]->buffers();
      absl::Status s = (*set)->SetLayer(p, b);
      if (s.ok()) s = (*set)->Replay(p, 32, stream);
      if (s.ok()) s = mla_tail::internal::CudaStatus(cudaStreamSynchronize(stream), "sync");
      if (s.ok()) s = problems[p]->Check(b.output, problems[p]->SampleRows(), true);
      if (!s.ok()) return fail(s.ToString());
      expected[p] = *DownloadBits(b.output, problems[p]->output_elements());
    }
    std::mt19937 random(index);
    const auto end = std::chrono::steady_clock::now() + kDuration;
    // Bounded by time, with a floor of replays per thread (a sanitizer slows each one a lot).
    for (int done = 0;
         (std::chrono::steady_clock::now() < end || done < kMinReplays) && failures == 0; ++done) {
      const int layer = random() % 2, p = random() % 2;
      const mla_tail::TailBuffers b = problems[p]->buffers();
      absl::Status s = problems[p]->PoisonOutput(b.output, stream);
      if (s.ok()) s = (*set)->SetLayer(layer, b);
      if (s.ok()) s = (*set)->Replay(layer, 32, stream);
      if (s.ok()) s = mla_tail::internal::CudaStatus(cudaStreamSynchronize(stream), "sync");
      if (!s.ok()) return fail(s.ToString());
      absl::StatusOr<std::vector<uint16_t>> got =
          DownloadBits(b.output, problems[p]->output_elements());
      if (!got.ok() || *got != expected[p]) return fail("a replay's output differs");
      ++replays;
    }
    set->reset();
    cudaStreamDestroy(stream);
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(worker, i);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_GE(replays, kThreads * kMinReplays);
  RecordProperty("replays", static_cast<int>(replays));
}

}  // namespace
}  // namespace mla_tail_testing

// Two GPUs as tensor parallelism uses them: a layer's 24 heads split 12 + 12, one graph set per
// device on the fused or the BMM path, each driven by its own thread at the same time; each half
// equals, bit for bit, its columns of the single-device result. And an instance of device 1
// used while the thread has device 0 current. Needs two GPUs (MLA_TAIL_REQUIRE_GPUS=2 makes
// their absence a failure).

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

constexpr int kHeads = 24;
constexpr int kDevices = 2;
constexpr int kLocalHeads = kHeads / kDevices;
// The sanitizer profile: 256 rows (its largest bucket) and 2 rounds.
const int kRows = ForProfile(1024, 256);
const int kRounds = ForProfile(25, 2);
// Fused and BMM paths at 12 heads; the last bucket is kRows.
const std::vector<int> kBuckets = ForProfile({1, 16, 64, 256, 1024}, {1, 16, 64, 256});

// One device's share: its heads' slices of the full problem's inputs, copied to it, run by a
// graph set of its own on its own stream; returns the first mismatches as an error.
absl::Status RunHalf(int device, mla_tail::TailPath path, const mla_tail::TailBuffers& full,
                     const std::map<int, std::vector<uint16_t>>& expected, int64_t* replays) {
  MLA_RETURN_IF_CUDA_ERROR(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  struct StreamCloser {
    cudaStream_t s;
    ~StreamCloser() { cudaStreamDestroy(s); }
  } closer{stream};

  constexpr int64_t kWidth = int64_t{kLocalHeads} * mla_tail::kValueDim;
  const int first_head = device * kLocalHeads;
  DeviceMemory latent, w_uv, gate, lengths, output;
  MLA_RETURN_IF_ERROR(
      latent.Reset(static_cast<size_t>(kRows) * kLocalHeads * mla_tail::kLatentDim * 2));
  MLA_RETURN_IF_ERROR(w_uv.Reset(size_t{kLocalHeads} * full.w_head_stride * 2));
  MLA_RETURN_IF_ERROR(gate.Reset(static_cast<size_t>(kRows) * kWidth * 2));
  MLA_RETURN_IF_ERROR(lengths.Reset(static_cast<size_t>(kRows) * sizeof(int32_t)));
  MLA_RETURN_IF_ERROR(output.Reset(static_cast<size_t>(kRows) * kWidth * 2));
  // Across devices: cudaMemcpyDefault works out where each pointer lives.
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpy2DAsync(latent.get(), size_t{kLocalHeads} * mla_tail::kLatentDim * 2,
                        full.latent + int64_t{first_head} * mla_tail::kLatentDim,
                        full.latent_row_stride * 2, size_t{kLocalHeads} * mla_tail::kLatentDim * 2,
                        kRows, cudaMemcpyDefault, stream),
      "copy latent");
  MLA_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(w_uv.get(), full.w_uv + first_head * full.w_head_stride,
                                           w_uv.bytes(), cudaMemcpyDefault, stream),
                           "copy w_uv");
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpy2DAsync(gate.get(), kWidth * 2, full.gate + first_head * mla_tail::kValueDim,
                        full.gate_row_stride * 2, kWidth * 2, kRows, cudaMemcpyDefault, stream),
      "copy gate");
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(lengths.get(), full.lengths, lengths.bytes(), cudaMemcpyDefault, stream),
      "copy lengths");
  mla_tail::TailBuffers local = mla_tail::CompactBuffers(
      {kLocalHeads, kRows, 1}, latent.as<mla_tail::bf16>(), w_uv.as<mla_tail::bf16>(),
      gate.as<mla_tail::bf16>(), lengths.as<int32_t>(), output.as<mla_tail::bf16>());
  local.w_head_stride = full.w_head_stride;
  local.w_row_stride = full.w_row_stride;

  mla_tail::GraphSetOptions options;
  options.heads = kLocalHeads;
  options.layers = 1;
  options.buckets = kBuckets;
  options.path = path;
  absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
      mla_tail::TailGraphSet::Create(device, options);
  if (!set.ok()) return set.status();
  MLA_RETURN_IF_ERROR((*set)->SetLayer(0, local));
  MLA_RETURN_IF_ERROR((*set)->CaptureAll());

  std::vector<uint16_t> got(static_cast<size_t>(kRows) * kWidth);
  for (int round = 0; round < kRounds; ++round) {
    for (int rows : kBuckets) {
      MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(output.get(), 0xff, output.bytes(), stream),
                               "poison output");
      MLA_RETURN_IF_ERROR((*set)->Replay(0, rows, stream));
      MLA_RETURN_IF_CUDA_ERROR(
          cudaMemcpyAsync(got.data(), output.get(), output.bytes(), cudaMemcpyDeviceToHost, stream),
          "download");
      MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "replay");
      ++*replays;
      const std::vector<uint16_t>& want = expected.at(rows);
      const int64_t full_stride = full.output_row_stride;
      for (int64_t t = 0; t < kRows; ++t) {
        for (int64_t c = 0; c < kWidth; ++c) {
          const uint16_t w = want[t * full_stride + int64_t{first_head} * mla_tail::kValueDim + c];
          const uint16_t g = got[t * kWidth + c];
          if (w != g) {
            return absl::InternalError(absl::StrCat(
                "device ", device, ", round ", round, ", rows ", rows, ": row ", t, " column ", c,
                " is 0x", absl::Hex(g), ", the single device has 0x", absl::Hex(w)));
          }
        }
      }
    }
  }
  if ((*set)->stats().instantiations != static_cast<int64_t>(kBuckets.size())) {
    return absl::InternalError(absl::StrCat("device ", device, ": ", (*set)->stats().instantiations,
                                            " instantiations; expected one per bucket"));
  }
  return absl::OkStatus();
}

class MultiGpuTest : public ::testing::TestWithParam<mla_tail::TailPath> {};

TEST_P(MultiGpuTest, HeadsSplitAcrossTwoDevicesEqualOneDevice) {
  MLA_REQUIRE_GPUS_OR_SKIP(kDevices);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // The single-device result, per bucket, from the eager tail on device 0 (integer data, whose
  // sums are exact, and one gate computation: every path and kernel gives the same bits),
  // checked against the CPU reference.
  ProblemOptions problem_options;
  problem_options.shape = {kHeads, kRows, 1};
  problem_options.seed = 24;
  problem_options.guard_rows = 0;
  absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(problem_options, stream);
  ASSERT_TRUE(problem.ok()) << problem.status();
  const mla_tail::TailBuffers full = (*problem)->buffers();
  mla_tail::TailOptions tail_options;
  tail_options.max_rows = kRows;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
      mla_tail::MlaTail::Create(0, tail_options);
  ASSERT_TRUE(tail.ok()) << tail.status();
  std::map<int, std::vector<uint16_t>> expected;
  for (int rows : kBuckets) {
    ASSERT_OK((*problem)->PoisonOutput(full.output, stream));
    ASSERT_OK((*tail)->Run({kHeads, rows, 1}, full, stream));
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(full.output, (*problem)->output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    expected[rows] = *std::move(bits);
  }
  ASSERT_OK((*problem)->Check(full.output, (*problem)->SampleRows(), /*exact=*/true));

  absl::Status results[kDevices];
  int64_t replays[kDevices] = {};
  std::vector<std::thread> threads;
  for (int device = 0; device < kDevices; ++device) {
    threads.emplace_back([&, device] {
      results[device] = RunHalf(device, GetParam(), full, expected, &replays[device]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int device = 0; device < kDevices; ++device) {
    EXPECT_TRUE(results[device].ok()) << "device " << device << ": " << results[device];
    EXPECT_EQ(replays[device], kRounds * static_cast<int64_t>(kBuckets.size()));
  }
  RecordProperty("replays_per_device", static_cast<int>(replays[0]));
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Paths, MultiGpuTest,
                         ::testing::Values(mla_tail::TailPath::kFused, mla_tail::TailPath::kBmm),
                         [](const ::testing::TestParamInfo<mla_tail::TailPath>& info) {
                           return std::string(mla_tail::TailPathName(info.param));
                         });

// Runs `f` with `device` current, then makes device 0 current again.
template <typename F>
void OnDevice(int device, F f) {
  ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
  f();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// The thread's current device stays 0 through a library call.
void ExpectDeviceZero(const char* after) {
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0) << after << " changed the current device";
}

// Instances of device 1 used while the thread has device 0 current: MlaTail::Run on both paths,
// on a stream of device 1 and on the legacy default stream (which the call makes device 1's),
// TailGraphSet's capture and replay, AddTailNode and TailNode::Update. Each computes the tail on
// device 1 and leaves device 0 current.
TEST(InstanceOfAnotherDeviceTest, WorksWhileAnotherDeviceIsCurrent) {
  MLA_REQUIRE_GPUS_OR_SKIP(2);
  cudaStream_t stream = nullptr;
  std::unique_ptr<Problem> problem;
  OnDevice(1, [&] {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ProblemOptions options;
    options.shape = {12, 64, 2};
    options.seed = 77;
    absl::StatusOr<std::unique_ptr<Problem>> created = Problem::Create(options, stream);
    ASSERT_TRUE(created.ok()) << created.status();
    problem = *std::move(created);
  });
  ASSERT_NE(problem, nullptr);
  const mla_tail::TailBuffers b = problem->buffers();
  auto poison = [&] {
    OnDevice(1, [&] {
      ASSERT_OK(problem->PoisonOutput(b.output, stream));
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    });
  };
  auto expect_computed = [&](const char* what) {
    SCOPED_TRACE(what);
    ExpectDeviceZero(what);
    OnDevice(1, [&] { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); });
    EXPECT_OK(problem->Check(b.output, problem->SampleRows(), true));
  };

  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(1, {});
  ASSERT_TRUE(tail.ok()) << tail.status();
  ExpectDeviceZero("MlaTail::Create");
  for (mla_tail::TailPath path : {mla_tail::TailPath::kFused, mla_tail::TailPath::kBmm}) {
    for (cudaStream_t s : {stream, cudaStream_t{nullptr}}) {
      SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), s == nullptr ? ", stream 0" : ""));
      poison();
      ASSERT_OK((*tail)->Run(problem->shape(), b, s, path));
      expect_computed("MlaTail::Run");
    }
  }

  mla_tail::GraphSetOptions options;
  options.heads = 12;
  options.q = 2;
  options.layers = 1;
  options.buckets = {16, 64};
  absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
      mla_tail::TailGraphSet::Create(1, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, b));
  ASSERT_OK((*set)->CaptureAll());
  ExpectDeviceZero("TailGraphSet::CaptureAll");
  poison();
  ASSERT_OK((*set)->Replay(0, 64, stream));
  expect_computed("TailGraphSet::Replay");

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  absl::StatusOr<mla_tail::TailNode> node =
      mla_tail::AddTailNode(**tail, graph, {}, problem->shape(), b);
  ASSERT_TRUE(node.ok()) << node.status();
  ExpectDeviceZero("AddTailNode");
  cudaGraphExec_t exec = nullptr;
  OnDevice(1, [&] { ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess); });
  ASSERT_OK(node->Update(exec, b));
  ExpectDeviceZero("TailNode::Update");
  poison();
  OnDevice(1, [&] { ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess); });
  expect_computed("AddTailNode's graph");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  set->reset();
  tail->reset();
  ExpectDeviceZero("the destructors");
  OnDevice(1, [&] { cudaStreamDestroy(stream); });
}

}  // namespace
}  // namespace mla_tail_testing

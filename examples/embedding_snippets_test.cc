// Runs the README's embedding snippets (embedding_snippets.cc) on the GPU and checks their
// output against the CPU reference: the suites' data (integers whose exact sums bf16 must round,
// gates over the sigmoid's range with its edges), compared with v pinned and only the sigmoid
// allowed its bound (testing/support/reference.h). Without a usable sm_90 GPU the test skips
// (fails instead when MLA_TAIL_REQUIRE_GPU is set to anything but 0).

#include "examples/embedding_snippets.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/gpu.h"
#include "testing/support/reference.h"
#include "testing/support/test_values.h"

namespace mla_tail_examples {
namespace {

using mla_tail_testing::GpuRequired;
using mla_tail_testing::TestValue;
using mla_tail_testing::Values;

constexpr int kHeads = 2;
constexpr int kRows = 16;  // the largest bucket
constexpr int kColumns = kHeads * mla_tail::kValueDim;

uint16_t LatentBits(int t, int h, int k) {
  return TestValue(11, (uint64_t(t) * kHeads + h) * mla_tail::kLatentDim + k,
                   Values::kRoundingIntegers);
}
uint16_t WeightBits(int h, int k, int d) {
  return TestValue(12, (uint64_t(h) * mla_tail::kValueDim + d) * mla_tail::kLatentDim + k,
                   Values::kRoundingIntegers);
}
uint16_t GateBits(int t, int column) {
  return TestValue(13, uint64_t(t) * kColumns + column, Values::kGates);
}

template <typename T>
T* DeviceCopy(const std::vector<T>& host) {
  void* p = nullptr;
  if (cudaMalloc(&p, host.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

class EmbeddingSnippetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, {});
    if (!tail.ok()) {
      if (tail.status().code() != absl::StatusCode::kFailedPrecondition || GpuRequired()) {
        GTEST_FAIL() << "no usable GPU: " << tail.status();
      }
      GTEST_SKIP() << "no usable GPU, test skipped (set MLA_TAIL_REQUIRE_GPU=1 to fail "
                      "instead): "
                   << tail.status();
    }
    tail_ = std::move(*tail);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);

    std::vector<uint16_t> latent(size_t{kRows} * kHeads * mla_tail::kLatentDim);
    for (int t = 0; t < kRows; ++t)
      for (int h = 0; h < kHeads; ++h)
        for (int k = 0; k < mla_tail::kLatentDim; ++k)
          latent[(static_cast<size_t>(t) * kHeads + h) * mla_tail::kLatentDim + k] =
              LatentBits(t, h, k);
    std::vector<uint16_t> w_uv(size_t{kHeads} * mla_tail::kValueDim * mla_tail::kLatentDim);
    for (int h = 0; h < kHeads; ++h)
      for (int d = 0; d < mla_tail::kValueDim; ++d)
        for (int k = 0; k < mla_tail::kLatentDim; ++k)
          w_uv[(static_cast<size_t>(h) * mla_tail::kValueDim + d) * mla_tail::kLatentDim + k] =
              WeightBits(h, k, d);
    lengths_host_.resize(kRows);
    for (int r = 0; r < kRows; ++r) lengths_host_[r] = r % 5 == 3 ? 0 : 1 + r;

    latent_ = DeviceCopy(latent);
    w_uv_ = DeviceCopy(w_uv);
    std::vector<uint16_t> gate(size_t{kRows} * kColumns);
    for (int t = 0; t < kRows; ++t)
      for (int c = 0; c < kColumns; ++c)
        gate[static_cast<size_t>(t) * kColumns + c] = GateBits(t, c);
    gate_ = DeviceCopy(gate);
    lengths_ = DeviceCopy(lengths_host_);
    for (uint16_t*& out : outputs_) {
      out = DeviceCopy(std::vector<uint16_t>(size_t{kRows} * kColumns, 0xffff));
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  void TearDown() override {
    for (void* p : {static_cast<void*>(latent_), static_cast<void*>(w_uv_),
                    static_cast<void*>(gate_), static_cast<void*>(lengths_)}) {
      cudaFree(p);
    }
    for (uint16_t* out : outputs_) cudaFree(out);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  mla_tail::TailBuffers Buffers(int output) const {
    return mla_tail::CompactBuffers({kHeads, kRows, 1},
                                    reinterpret_cast<const mla_tail::bf16*>(latent_),
                                    reinterpret_cast<const mla_tail::bf16*>(w_uv_),
                                    reinterpret_cast<const mla_tail::bf16*>(gate_), lengths_,
                                    reinterpret_cast<mla_tail::bf16*>(outputs_[output]));
  }

  // Compares output `output`'s first `rows` rows with the reference (+0 beyond `active_rows`).
  void ExpectOutput(int output, int rows, int active_rows) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<uint16_t> got(size_t{kRows} * kColumns);
    ASSERT_EQ(cudaMemcpy(got.data(), outputs_[output], got.size() * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
    mla_tail_testing::ReferenceInputs in;
    in.heads = kHeads;
    in.q = 1;
    in.latent = LatentBits;
    in.w_uv = WeightBits;
    in.gate = GateBits;
    in.lengths = [&](int t) { return t < active_rows ? lengths_host_[t] : 0; };
    int mismatches = 0;
    for (int t = 0; t < rows; ++t) {
      for (int h = 0; h < kHeads; ++h) {
        for (int d = 0; d < mla_tail::kValueDim; ++d) {
          const uint16_t value =
              got[static_cast<size_t>(t) * kColumns + h * mla_tail::kValueDim + d];
          std::string why;
          if (!mla_tail_testing::OutputAgrees(mla_tail_testing::ReferenceOutput(in, t, h, d), value,
                                              /*exact=*/true, &why) &&
              ++mismatches <= 5) {
            ADD_FAILURE() << "output " << output << " row " << t << " head " << h << " column " << d
                          << ": " << why;
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0);
  }

  std::unique_ptr<mla_tail::MlaTail> tail_;
  cudaStream_t stream_ = nullptr;
  std::vector<int32_t> lengths_host_;
  uint16_t* latent_ = nullptr;
  uint16_t* w_uv_ = nullptr;
  uint16_t* gate_ = nullptr;
  int32_t* lengths_ = nullptr;
  uint16_t* outputs_[3] = {};
};

TEST_F(EmbeddingSnippetsTest, EagerTailUnderCapture) {
  absl::StatusOr<cudaGraphExec_t> exec =
      CaptureStepWithTail(*tail_, {kHeads, kRows, 1}, Buffers(0), stream_);
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_EQ(cudaGraphLaunch(*exec, stream_), cudaSuccess);
  ExpectOutput(0, kRows, kRows);
  cudaGraphExecDestroy(*exec);
}

// A Run the tail refuses (no output) ends the capture all the same: its status is returned,
// the stream captures no more, the graph is gone and no CUDA error is left pending.
TEST_F(EmbeddingSnippetsTest, EagerTailUnderCaptureRefusedEndsTheCapture) {
  mla_tail::TailBuffers no_output = Buffers(0);
  no_output.output = nullptr;
  absl::StatusOr<cudaGraphExec_t> exec =
      CaptureStepWithTail(*tail_, {kHeads, kRows, 1}, no_output, stream_);
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument) << exec.status();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(stream_, &capture), cudaSuccess);
  EXPECT_EQ(capture, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  absl::StatusOr<cudaGraphExec_t> again =
      CaptureStepWithTail(*tail_, {kHeads, kRows, 1}, Buffers(0), stream_);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(cudaGraphLaunch(*again, stream_), cudaSuccess);
  ExpectOutput(0, kRows, kRows);
  cudaGraphExecDestroy(*again);
}

TEST_F(EmbeddingSnippetsTest, GraphSetReplay) {
  const std::vector<mla_tail::TailBuffers> layers = {Buffers(0), Buffers(1)};
  absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
      MakeTailGraphSet(/*device=*/0, kHeads, {1, kRows}, layers);
  ASSERT_TRUE(set.ok()) << set.status();
  constexpr int kBatch = 13;  // padded to the 16-row bucket
  ASSERT_TRUE(DecodeStepWithGraphSet(**set, kBatch, lengths_, stream_).ok());
  ExpectOutput(0, kRows, kBatch);
  ExpectOutput(1, kRows, kBatch);
}

TEST_F(EmbeddingSnippetsTest, TailNodeUpdatedInPlace) {
  StepGraph step;
  ASSERT_EQ(cudaGraphCreate(&step.graph, 0), cudaSuccess);
  std::vector<cudaGraphNode_t> attention(2);
  for (cudaGraphNode_t& node : attention) {  // stand-ins for the runtime's attention kernels
    ASSERT_EQ(cudaGraphAddEmptyNode(&node, step.graph, nullptr, 0), cudaSuccess);
  }
  const std::vector<mla_tail::TailBuffers> first = {Buffers(0), Buffers(0)};
  const absl::Status added =
      AddTailsToStepGraph(*tail_, {kHeads, kRows, 1}, attention, first, &step);
  ASSERT_TRUE(added.ok()) << added;
  const std::vector<mla_tail::TailBuffers> moved = {Buffers(1), Buffers(2)};
  const absl::Status pointed = PointStepAt(step, moved);
  ASSERT_TRUE(pointed.ok()) << pointed;
  ASSERT_EQ(cudaGraphLaunch(step.exec, stream_), cudaSuccess);
  ExpectOutput(1, kRows, kRows);
  ExpectOutput(2, kRows, kRows);
  cudaGraphExecDestroy(step.exec);
  cudaGraphDestroy(step.graph);
}

TEST_F(EmbeddingSnippetsTest, TailNodesNeedAnAttentionNodePerLayer) {
  StepGraph step;
  ASSERT_EQ(cudaGraphCreate(&step.graph, 0), cudaSuccess);
  std::vector<cudaGraphNode_t> attention(1);
  ASSERT_EQ(cudaGraphAddEmptyNode(&attention[0], step.graph, nullptr, 0), cudaSuccess);
  const std::vector<mla_tail::TailBuffers> layers = {Buffers(0), Buffers(1)};
  const absl::Status added =
      AddTailsToStepGraph(*tail_, {kHeads, kRows, 1}, attention, layers, &step);
  EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument) << added;
  EXPECT_TRUE(step.tails.empty());
  EXPECT_EQ(step.exec, nullptr);
  cudaGraphDestroy(step.graph);
}

// A second call, on a new graph, replaces the first call's executable graph (destroyed) and runs.
TEST_F(EmbeddingSnippetsTest, TailNodesAddedAgainToANewGraph) {
  StepGraph step;
  for (int output : {0, 1}) {
    if (step.graph != nullptr) {
      ASSERT_EQ(cudaGraphDestroy(step.graph), cudaSuccess);
    }
    ASSERT_EQ(cudaGraphCreate(&step.graph, 0), cudaSuccess);
    std::vector<cudaGraphNode_t> attention(1);
    ASSERT_EQ(cudaGraphAddEmptyNode(&attention[0], step.graph, nullptr, 0), cudaSuccess);
    const std::vector<mla_tail::TailBuffers> layers = {Buffers(output)};
    const absl::Status added =
        AddTailsToStepGraph(*tail_, {kHeads, kRows, 1}, attention, layers, &step);
    ASSERT_TRUE(added.ok()) << added;
    ASSERT_EQ(step.tails.size(), 1u);
  }
  ASSERT_EQ(cudaGraphLaunch(step.exec, stream_), cudaSuccess);
  ExpectOutput(1, kRows, kRows);
  cudaGraphExecDestroy(step.exec);
  cudaGraphDestroy(step.graph);
}

// A call that fails keeps the step's exec and tails, and removes what it added to its graph.
TEST_F(EmbeddingSnippetsTest, AFailedCallKeepsTheStep) {
  StepGraph step;
  ASSERT_EQ(cudaGraphCreate(&step.graph, 0), cudaSuccess);
  std::vector<cudaGraphNode_t> attention(2);
  ASSERT_EQ(cudaGraphAddEmptyNode(&attention[0], step.graph, nullptr, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&attention[1], step.graph, nullptr, 0), cudaSuccess);
  ASSERT_TRUE(
      AddTailsToStepGraph(*tail_, {kHeads, kRows, 1}, {attention[0]}, {Buffers(0)}, &step).ok());
  const cudaGraphExec_t kept = step.exec;
  cudaGraph_t first = step.graph;
  ASSERT_EQ(cudaGraphCreate(&step.graph, 0), cudaSuccess);
  cudaGraphNode_t second_attention[2];
  ASSERT_EQ(cudaGraphAddEmptyNode(&second_attention[0], step.graph, nullptr, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphAddEmptyNode(&second_attention[1], step.graph, nullptr, 0), cudaSuccess);
  mla_tail::TailBuffers broken = Buffers(1);
  broken.lengths = nullptr;  // the second layer's tail is refused after the first was added
  const absl::Status added = AddTailsToStepGraph(*tail_, {kHeads, kRows, 1}, second_attention,
                                                 {Buffers(1), broken}, &step);
  EXPECT_EQ(added.code(), absl::StatusCode::kInvalidArgument) << added;
  EXPECT_EQ(step.exec, kept);
  EXPECT_EQ(step.tails.size(), 1u);
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(step.graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 2u) << "the refused call's tails stay in the graph";
  ASSERT_EQ(cudaGraphLaunch(step.exec, stream_), cudaSuccess);
  ExpectOutput(0, kRows, kRows);
  cudaGraphExecDestroy(step.exec);
  cudaGraphDestroy(step.graph);
  cudaGraphDestroy(first);
}

}  // namespace
}  // namespace mla_tail_examples

// The GPU suite of graph/: replays equal the eager tail bit for bit, in-place pointer updates,
// padding, lazy and ahead-of-time capture, child-graph embedding, two instances on one device.

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/kernels/params.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::GraphSetOptions;
using ::mla_tail::TailGraphSet;
using ::mla_tail::TailPath;
using ::testing::HasSubstr;

const std::vector<int> kBuckets = {1, 2, 8, 16, 24, 40, 64};

class GraphGpuTest : public mla_tail_testing::GpuStreamTest<::testing::TestWithParam<TailPath>> {
 protected:
  void SetUp() override {
    GpuStreamTest::SetUp();
    if (!StreamReady()) return;
    mla_tail::TailOptions options;
    options.max_rows = 256;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> eager =
        mla_tail::MlaTail::Create(0, options);
    ASSERT_TRUE(eager.ok()) << eager.status();
    eager_ = *std::move(eager);
  }

  GraphSetOptions Options(int heads, int q, int layers, std::vector<int> buckets = kBuckets) {
    GraphSetOptions o;
    o.heads = heads;
    o.q = q;
    o.layers = layers;
    o.buckets = std::move(buckets);
    o.path = GetParam();
    return o;
  }

  std::unique_ptr<TailGraphSet> MakeSet(const GraphSetOptions& options) {
    absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
    EXPECT_TRUE(set.ok()) << set.status();
    return set.ok() ? *std::move(set) : nullptr;
  }

  std::unique_ptr<Problem> MakeProblem(int heads, int rows, int q, uint64_t seed,
                                       int inactive_every = 3) {
    ProblemOptions options;
    options.shape = {heads, rows, q};
    options.seed = seed;
    options.inactive_every = inactive_every;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  // 4 heads x 16 rows whose latent, gate, output and W_UV rows are padded by 64 elements (other
  // strides than MakeProblem's), W_UV in the kv_b_proj view when asked.
  std::unique_ptr<Problem> MakePaddedProblem(uint64_t seed, bool kv_b_proj_view) {
    ProblemOptions options;
    options.shape = {4, 16, 1};
    options.row_padding = 64;
    options.w_row_padding = 64;
    options.kv_b_proj_view = kv_b_proj_view;
    options.seed = seed;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  // The output bits of `run` into a freshly poisoned copy of the buffers' output layout.
  std::vector<uint16_t> Outputs(const Problem& problem, const mla_tail::TailBuffers& buffers) {
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(buffers.output, problem.output_elements());
    EXPECT_TRUE(bits.ok()) << bits.status();
    return bits.ok() ? *std::move(bits) : std::vector<uint16_t>{};
  }

  // Replays `layer` for `rows` into `buffers` (poisoned first) and the eager tail for the
  // bucket's rows into a second output; both must agree bit for bit.
  void ExpectReplayEqualsEager(TailGraphSet& set, const Problem& problem, int layer, int rows,
                               mla_tail::TailBuffers buffers) {
    SCOPED_TRACE(absl::StrCat("layer ", layer, " rows ", rows));
    ASSERT_OK(problem.PoisonOutput(buffers.output, stream_));
    ASSERT_OK(set.SetLayer(layer, buffers));
    ASSERT_OK(set.Replay(layer, rows, stream_));
    absl::StatusOr<DeviceMemory> eager_out = problem.NewOutput(stream_);
    ASSERT_TRUE(eager_out.ok());
    mla_tail::TailBuffers eager_buffers = buffers;
    eager_buffers.output = eager_out->as<mla_tail::bf16>();
    const int bucket = *set.BucketRows(rows);
    ASSERT_OK(eager_->Run({problem.shape().heads, bucket, problem.shape().q}, eager_buffers,
                          stream_, GetParam()));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_TRUE(Outputs(problem, buffers) == Outputs(problem, eager_buffers))
        << "replay differs from the eager tail";
  }

  std::unique_ptr<mla_tail::MlaTail> eager_;
};

// Every bucket, rows at and between buckets, q 1 and 2: replay == eager, and the full bucket
// == the CPU reference. The sanitizer profile takes each bucket's smallest and largest rows
// instead of every row count.
TEST_P(GraphGpuTest, ReplayEqualsEagerForEveryBucket) {
  for (int q : {1, 2}) {
    std::vector<int> buckets;
    for (int b : kBuckets) {
      if (b % q == 0) buckets.push_back(b);
    }
    std::unique_ptr<Problem> problem = MakeProblem(12, 64, q, 11 + q);
    ASSERT_NE(problem, nullptr);
    std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, q, 2, buckets));
    ASSERT_NE(set, nullptr);
    std::vector<int> row_counts;
    for (int rows = q; rows <= 64; rows += q) {
      const int bucket = *set->BucketRows(rows);
      if (!SanitizerProfile() || rows == q || rows == bucket ||
          *set->BucketRows(rows - q) != bucket) {
        row_counts.push_back(rows);
      }
    }
    for (int layer : {0, 1}) {
      for (int rows : row_counts) {
        std::vector<int32_t> lengths = problem->lengths();
        const int bucket = *set->BucketRows(rows);
        for (int r = rows / q; r < bucket / q; ++r) lengths[r] = 0;  // padding requests
        ASSERT_OK(problem->SetLengths(lengths, stream_));
        ExpectReplayEqualsEager(*set, *problem, layer, rows, problem->buffers());
      }
    }
    ASSERT_OK(problem->SetLengths(problem->lengths(), stream_));
    ASSERT_OK(set->Replay(0, 64, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
    EXPECT_EQ(set->stats().instantiations, 2 * static_cast<int64_t>(buckets.size()));
  }
}

// Each pointer alone, then all together, changes without a new capture or instantiation.
TEST_P(GraphGpuTest, PointerUpdatesReplayWithoutInstantiation) {
  std::unique_ptr<Problem> a = MakeProblem(16, 40, 2, 21);
  std::unique_ptr<Problem> b = MakeProblem(16, 40, 2, 22, /*inactive_every=*/2);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(16, 2, 1, {8, 24, 40}));
  ASSERT_NE(set, nullptr);
  ASSERT_OK(set->SetLayer(0, a->buffers()));
  ASSERT_OK(set->CaptureAll());
  const int64_t instantiations = set->stats().instantiations;
  ExpectReplayEqualsEager(*set, *a, 0, 40, a->buffers());

  using Mutation = void (*)(mla_tail::TailBuffers&, const mla_tail::TailBuffers&);
  const std::pair<const char*, Mutation> mutations[] = {
      {"latent",
       [](mla_tail::TailBuffers& x, const mla_tail::TailBuffers& y) { x.latent = y.latent; }},
      {"w_uv", [](mla_tail::TailBuffers& x, const mla_tail::TailBuffers& y) { x.w_uv = y.w_uv; }},
      {"gate", [](mla_tail::TailBuffers& x, const mla_tail::TailBuffers& y) { x.gate = y.gate; }},
      {"lengths",
       [](mla_tail::TailBuffers& x, const mla_tail::TailBuffers& y) { x.lengths = y.lengths; }},
      {"output",
       [](mla_tail::TailBuffers& x, const mla_tail::TailBuffers& y) { x.output = y.output; }},
      {"all", [](mla_tail::TailBuffers& x, const mla_tail::TailBuffers& y) { x = y; }},
  };
  for (const auto& [name, mutate] : mutations) {
    SCOPED_TRACE(name);
    mla_tail::TailBuffers buffers = a->buffers();
    mutate(buffers, b->buffers());
    const int64_t updates = set->stats().node_updates;
    ExpectReplayEqualsEager(*set, *a, 0, 40, buffers);
    EXPECT_GT(set->stats().node_updates, updates);
    // Back to A: the graph follows again.
    ExpectReplayEqualsEager(*set, *a, 0, 40, a->buffers());
  }
  // Unchanged pointers update nothing.
  const int64_t updates = set->stats().node_updates;
  ASSERT_OK(set->Replay(0, 40, stream_));
  ASSERT_OK(set->Replay(0, 40, stream_));
  EXPECT_EQ(set->stats().node_updates, updates);
  EXPECT_EQ(set->stats().instantiations, instantiations);
  ASSERT_OK(a->Check(a->buffers().output, a->SampleRows(), true));
}

// A stride change re-captures exactly where the GEMM holds the stride (the BMM path's latent and
// W_UV row strides; W_UV rows padded beyond 512 here) and rewrites the kernel node in place
// everywhere else (gate and output strides on every path, everything on the fused path); every
// replay equals the eager tail and the reference.
TEST_P(GraphGpuTest, StrideChangesAreApplied) {
  std::unique_ptr<Problem> padded = MakePaddedProblem(ProblemOptions{}.seed, true);
  ASSERT_NE(padded, nullptr);
  std::unique_ptr<Problem> compact = MakeProblem(4, 16, 1, 41);
  ASSERT_NE(compact, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(4, 1, 1, {16}));
  ASSERT_NE(set, nullptr);
  const bool bmm = GetParam() == TailPath::kBmm;
  auto expect_counts = [&](int64_t captured, int64_t node_updates) {
    EXPECT_EQ(set->stats().graphs_captured, captured);
    EXPECT_EQ(set->stats().instantiations, captured);
    EXPECT_EQ(set->stats().node_updates, node_updates);
  };
  ExpectReplayEqualsEager(*set, *compact, 0, 16, compact->buffers());
  expect_counts(1, 0);
  ExpectReplayEqualsEager(*set, *padded, 0, 16, padded->buffers());
  ASSERT_OK(padded->Check(padded->buffers().output, padded->SampleRows(), true));
  expect_counts(bmm ? 2 : 1, bmm ? 0 : 1);
  ExpectReplayEqualsEager(*set, *compact, 0, 16, compact->buffers());
  expect_counts(bmm ? 3 : 1, bmm ? 0 : 2);
  // Only the gate and output strides change: a node update on every path.
  mla_tail::TailBuffers strides = compact->buffers();
  strides.gate = padded->buffers().gate;
  strides.gate_row_stride = padded->buffers().gate_row_stride;
  strides.output = padded->buffers().output;
  strides.output_row_stride = padded->buffers().output_row_stride;
  ExpectReplayEqualsEager(*set, *padded, 0, 16, strides);
  expect_counts(bmm ? 3 : 1, bmm ? 1 : 3);
}

// CaptureAll brings a graph captured before up to its layer's present buffers, as a replay would
// (a node update, or on the BMM path with other GEMM strides a re-capture, which plans the GEMM):
// a replay recorded into the caller's capture then runs the new buffers.
TEST_P(GraphGpuTest, CaptureAllBringsCapturedGraphsUpToTheLayer) {
  std::unique_ptr<Problem> padded = MakePaddedProblem(43, false);
  ASSERT_NE(padded, nullptr);
  std::unique_ptr<Problem> compact = MakeProblem(4, 16, 1, 42);
  ASSERT_NE(compact, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(4, 1, 1, {16}));
  ASSERT_NE(set, nullptr);
  const bool bmm = GetParam() == TailPath::kBmm;
  ASSERT_OK(set->SetLayer(0, compact->buffers()));
  ASSERT_OK(set->CaptureAll());
  EXPECT_EQ(set->stats().graphs_captured, 1);
  const mla_tail::TailBuffers b = padded->buffers();
  ASSERT_OK(set->SetLayer(0, b));
  ASSERT_OK(set->CaptureAll());
  EXPECT_EQ(set->stats().graphs_captured, bmm ? 2 : 1);
  EXPECT_EQ(set->stats().node_updates, bmm ? 0 : 1);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status replayed = set->Replay(0, 16, stream_);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess) << "the capture broke";
  const absl::Cleanup destroy_graph = [&] { cudaGraphDestroy(graph); };
  ASSERT_OK(replayed);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const absl::Cleanup destroy_exec = [&] { cudaGraphExecDestroy(exec); };
  ASSERT_OK(padded->PoisonOutput(b.output, stream_));
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(padded->Check(b.output, padded->SampleRows(), true));
}

// Lengths are read at replay time; padded rows are +0.0 even with NaN in their inputs, and the
// helper writes the padding lengths.
TEST_P(GraphGpuTest, LengthsAndPadding) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 40, 1, 51, /*inactive_every=*/0);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, 1, 1, {8, 40}));
  ASSERT_NE(set, nullptr);
  const mla_tail::TailBuffers b = problem->buffers();
  ASSERT_OK(set->SetLayer(0, b));
  ASSERT_OK(set->Replay(0, 40, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(b.output, problem->SampleRows(), true));

  // Finish some requests: the same graph follows the new contents.
  std::vector<int32_t> lengths = problem->lengths();
  lengths[0] = lengths[17] = lengths[39] = 0;
  ASSERT_OK(problem->SetLengths(lengths, stream_));
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK(set->Replay(0, 40, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(b.output, {0, 17, 38, 39}, true));

  // 29 rows in the 40-row bucket: rows 29..39 are padding with NaN latent and gate.
  const int rows = 29;
  ASSERT_EQ(cudaMemset2DAsync(const_cast<mla_tail::bf16*>(b.latent) + rows * b.latent_row_stride,
                              b.latent_row_stride * 2, 0xff, 12 * 512 * 2, 40 - rows, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaMemset2DAsync(const_cast<mla_tail::bf16*>(b.gate) + rows * b.gate_row_stride,
                              b.gate_row_stride * 2, 0xff, 12 * 128 * 2, 40 - rows, stream_),
            cudaSuccess);
  ASSERT_OK(mla_tail::ZeroPaddingLengths(const_cast<int32_t*>(b.lengths), rows, 40, 1, stream_));
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_OK(set->Replay(0, rows, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  absl::StatusOr<std::vector<uint16_t>> out = DownloadBits(b.output, problem->output_elements());
  ASSERT_TRUE(out.ok());
  const int width = 12 * 128;
  for (int t = rows; t < 40; ++t) {
    for (int c = 0; c < width; ++c) ASSERT_EQ((*out)[t * width + c], 0) << "padding row " << t;
  }
  for (int t = 0; t < rows; ++t) {
    for (int c = 0; c < width; ++c) {
      ASSERT_FALSE((*out)[t * width + c] == 0xffff && lengths[t] > 0) << "row " << t;
    }
  }
  std::vector<int32_t> device_lengths(40);
  ASSERT_EQ(cudaMemcpy(device_lengths.data(), b.lengths, 40 * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int r = 0; r < 40; ++r) EXPECT_EQ(device_lengths[r], r < rows ? lengths[r] : 0) << r;
}

// Beyond the largest bucket: OutOfRange, or the eager tail when the caller asked for it.
TEST_P(GraphGpuTest, RowsBeyondTheLargestBucket) {
  std::unique_ptr<Problem> problem = MakeProblem(8, 48, 1, 61);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(8, 1, 1, {8, 16, 32}));
  ASSERT_NE(set, nullptr);
  ASSERT_OK(set->SetLayer(0, problem->buffers()));
  const absl::Status beyond = set->Replay(0, 33, stream_);
  EXPECT_EQ(beyond.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(beyond.message()), HasSubstr("rows = 33"));
  EXPECT_EQ(set->BucketRows(33).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*set->BucketRows(17), 32);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  auto expect_untouched = [&](const char* after) {
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(problem->buffers().output, problem->output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    for (uint16_t b : *bits) ASSERT_EQ(b, 0xffff) << after << " wrote the output";
  };
  expect_untouched("a refused Replay");

  GraphSetOptions options = Options(8, 1, 1, {8, 16, 32});
  options.max_eager_rows = 48;
  std::unique_ptr<TailGraphSet> fallback = MakeSet(options);
  ASSERT_NE(fallback, nullptr);
  ASSERT_OK(fallback->SetLayer(0, problem->buffers()));
  // BucketRows agrees with Replay: the eager fallback runs exactly the rows asked for.
  EXPECT_EQ(*fallback->BucketRows(32), 32);
  EXPECT_EQ(*fallback->BucketRows(40), 40);
  EXPECT_EQ(*fallback->BucketRows(48), 48);
  EXPECT_EQ(fallback->BucketRows(49).status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_OK(fallback->Replay(0, 48, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
  EXPECT_EQ(fallback->stats().eager_runs, 1);
  ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
  EXPECT_EQ(fallback->Replay(0, 56, stream_).code(), absl::StatusCode::kOutOfRange);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expect_untouched("a Replay beyond max_eager_rows");
  EXPECT_EQ(fallback->stats().eager_runs, 1);

  // SetLayer checks the buffers for every row Replay may run: an output that begins 32 latent
  // rows on overlaps the latent's rows 32-47, which only the eager fallback reads.
  mla_tail::TailBuffers overlapping = problem->buffers();
  overlapping.output =
      const_cast<mla_tail::bf16*>(overlapping.latent) + 32 * overlapping.latent_row_stride;
  ASSERT_OK(set->SetLayer(0, overlapping));
  const absl::Status refused = fallback->SetLayer(0, overlapping);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("overlaps"));
}

// Lazy capture and ahead-of-time capture give the same bits.
TEST_P(GraphGpuTest, LazyEqualsAheadOfTime) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 64, 1, 71);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<TailGraphSet> lazy = MakeSet(Options(12, 1, 3));
  std::unique_ptr<TailGraphSet> ahead = MakeSet(Options(12, 1, 3));
  ASSERT_TRUE(lazy != nullptr && ahead != nullptr);
  for (int layer = 0; layer < 3; ++layer) {
    ASSERT_OK(lazy->SetLayer(layer, problem->buffers()));
    ASSERT_OK(ahead->SetLayer(layer, problem->buffers()));
  }
  ASSERT_OK(ahead->CaptureAll());
  EXPECT_EQ(ahead->stats().graphs_captured, 3 * static_cast<int64_t>(kBuckets.size()));
  EXPECT_EQ(lazy->stats().graphs_captured, 0);
  for (int rows : {1, 5, 16, 33, 64}) {
    for (int layer = 0; layer < 3; ++layer) {
      ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
      ASSERT_OK(lazy->Replay(layer, rows, stream_));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      const std::vector<uint16_t> from_lazy = Outputs(*problem, problem->buffers());
      ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
      ASSERT_OK(ahead->Replay(layer, rows, stream_));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_TRUE(from_lazy == Outputs(*problem, problem->buffers())) << rows << " " << layer;
    }
  }
  EXPECT_EQ(lazy->stats().graphs_captured, 3 * 5);
  EXPECT_EQ(ahead->stats().graphs_captured, 3 * static_cast<int64_t>(kBuckets.size()));
}

// An exported tail runs as a child node of a runtime's own graph, and follows a re-export.
TEST_P(GraphGpuTest, ChildGraphEmbedding) {
  std::unique_ptr<Problem> a = MakeProblem(12, 16, 1, 81);
  std::unique_ptr<Problem> b = MakeProblem(12, 16, 1, 82);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, 1, 2, {16}));
  ASSERT_NE(set, nullptr);
  ASSERT_OK(set->SetLayer(0, a->buffers()));
  ASSERT_OK(set->SetLayer(1, b->buffers()));

  cudaGraph_t step = nullptr;
  ASSERT_EQ(cudaGraphCreate(&step, 0), cudaSuccess);
  std::vector<cudaGraphNode_t> children;
  for (int layer : {0, 1}) {
    absl::StatusOr<cudaGraph_t> tail = set->ExportGraph(layer, 16);
    ASSERT_TRUE(tail.ok()) << tail.status();
    cudaGraphNode_t node;
    ASSERT_EQ(cudaGraphAddChildGraphNode(&node, step, children.data(), children.size(), *tail),
              cudaSuccess);
    cudaGraphDestroy(*tail);  // the child node holds its own copy
    children = {node};
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, step, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(a->Check(a->buffers().output, a->SampleRows(), true));
  ASSERT_OK(b->Check(b->buffers().output, b->SampleRows(), true));

  // Layer 1 moves to A's inputs and a fresh output: re-export, update the child in place.
  absl::StatusOr<DeviceMemory> out = a->NewOutput(stream_);
  ASSERT_TRUE(out.ok());
  ASSERT_OK(set->SetLayer(1, a->buffers_with_output(out->as<mla_tail::bf16>())));
  absl::StatusOr<cudaGraph_t> moved = set->ExportGraph(1, 16);
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(cudaGraphExecChildGraphNodeSetParams(exec, children[0], *moved), cudaSuccess);
  cudaGraphDestroy(*moved);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_TRUE(Outputs(*a, a->buffers()) ==
              Outputs(*a, a->buffers_with_output(out->as<mla_tail::bf16>())));

  // Back to B's buffers, applied by a Replay first: the export then carries them too.
  ASSERT_OK(set->SetLayer(1, b->buffers()));
  ASSERT_OK(b->PoisonOutput(b->buffers().output, stream_));
  ASSERT_OK(set->Replay(1, 16, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(b->PoisonOutput(b->buffers().output, stream_));
  absl::StatusOr<cudaGraph_t> back = set->ExportGraph(1, 16);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(cudaGraphExecChildGraphNodeSetParams(exec, children[0], *back), cudaSuccess);
  cudaGraphDestroy(*back);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(b->Check(b->buffers().output, b->SampleRows(), true));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(step);
}

// Two sets on one device, replayed alternately on two streams, do not disturb each other.
TEST_P(GraphGpuTest, TwoInstancesDoNotInterfere) {
  std::unique_ptr<Problem> a = MakeProblem(16, 64, 1, 91);
  std::unique_ptr<Problem> b = MakeProblem(16, 64, 1, 92);
  ASSERT_TRUE(a != nullptr && b != nullptr);
  std::unique_ptr<TailGraphSet> first = MakeSet(Options(16, 1, 2));
  std::unique_ptr<TailGraphSet> second = MakeSet(Options(16, 1, 2));
  ASSERT_TRUE(first != nullptr && second != nullptr);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  for (int layer : {0, 1}) {
    ASSERT_OK(first->SetLayer(layer, a->buffers()));
    ASSERT_OK(second->SetLayer(layer, b->buffers()));
  }
  for (int i = 0; i < ForProfile(20, 4); ++i) {
    ASSERT_OK(first->Replay(i % 2, 64, stream_));
    ASSERT_OK(second->Replay(i % 2, 64, other));
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_OK(a->Check(a->buffers().output, a->SampleRows(), true));
  ASSERT_OK(b->Check(b->buffers().output, b->SampleRows(), true));
  cudaStreamDestroy(other);
}

// Misuse returns a clear status and leaves the set usable.
TEST_P(GraphGpuTest, ErrorsLeaveTheSetUsable) {
  GraphSetOptions bad = Options(12, 2, 1, {2, 3});
  EXPECT_THAT(std::string(TailGraphSet::Create(0, bad).status().message()),
              HasSubstr("not a multiple of q"));
  bad = Options(12, 1, 0);
  EXPECT_THAT(std::string(TailGraphSet::Create(0, bad).status().message()), HasSubstr("layers"));
  bad = Options(0, 1, 1);
  EXPECT_THAT(std::string(TailGraphSet::Create(0, bad).status().message()), HasSubstr("heads"));

  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 2, 101);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, 2, 2, {8, 16}));
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->Replay(0, 8, stream_).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(set->CaptureAll().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(set->Replay(2, 8, stream_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set->Replay(-1, 8, stream_).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(set->SetLayer(0, problem->buffers()));
  ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
  EXPECT_EQ(set->Replay(0, 7, stream_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set->Replay(0, 0, stream_).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set->Replay(0, 18, stream_).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(set->Replay(1, 8, stream_).code(), absl::StatusCode::kFailedPrecondition);
  mla_tail::TailBuffers broken = problem->buffers();
  broken.lengths = nullptr;
  EXPECT_THAT(std::string(set->SetLayer(0, broken).message()), HasSubstr("lengths is null"));
  broken = problem->buffers();
  broken.latent += 1;  // misaligned
  EXPECT_EQ(set->SetLayer(0, broken).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(set->SetLayer(5, problem->buffers()).code(), absl::StatusCode::kInvalidArgument);
  // Rows that are not a positive multiple of q, everywhere rows are taken.
  for (int rows : {0, -2, 7}) {
    SCOPED_TRACE(rows);
    EXPECT_EQ(set->BucketRows(rows).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(set->ExportGraph(0, rows).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(set->Replay(0, rows, stream_).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(set->ExportGraph(0, 18).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(set->stats().graphs_captured, 0);
  // Nothing of the caller's was written by any of the calls above.
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  absl::StatusOr<std::vector<uint16_t>> sentinel =
      DownloadBits(problem->buffers().output, problem->output_elements());
  ASSERT_TRUE(sentinel.ok()) << sentinel.status();
  for (uint16_t bits : *sentinel) ASSERT_EQ(bits, 0xffff) << "a failed call wrote the output";
  // Still usable, with the buffers it had.
  ASSERT_OK(set->Replay(0, 16, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
}

// With two GPUs: a stream of another device is refused by name by Replay outside a capture, also
// after it was first given to Replay while it captured (when CUDA cannot name a capturing
// stream's device, and the replay is recorded or fails at its launch instead).
TEST_P(GraphGpuTest, StreamOfAnotherDeviceIsRefusedOnceItNoLongerCaptures) {
  MLA_REQUIRE_GPUS_OR_SKIP(2);
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 1, 103);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, 1, 1, {16}));
  ASSERT_NE(set, nullptr);
  ASSERT_OK(set->SetLayer(0, problem->buffers()));
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(other, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const absl::Status under_capture = set->Replay(0, 16, other);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(other, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // an invalidated capture's error is not the test's subject
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  SCOPED_TRACE(absl::StrCat("under capture: ", under_capture.ToString(),
                            "; capture ended: ", cudaGetErrorName(ended)));
  const absl::Status status = set->Replay(0, 16, other);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("stream belongs to device 1"));
  EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

// A replay on a stream of the set's device is accepted; once that stream is destroyed, another
// device's stream is refused before any launch, even where CUDA hands it the destroyed stream's
// handle (the set knows streams by their IDs, which are never reused). Streams of device 1 are
// made until one takes the old handle or 32 were made: each is refused.
TEST_P(GraphGpuTest, AReusedStreamHandleOfAnotherDeviceIsRefused) {
  MLA_REQUIRE_GPUS_OR_SKIP(2);
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 1, 104);
  ASSERT_NE(problem, nullptr);
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, 1, 1, {16}));
  ASSERT_NE(set, nullptr);
  ASSERT_OK(set->SetLayer(0, problem->buffers()));
  cudaStream_t first = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&first, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_OK(set->Replay(0, 16, first));
  ASSERT_EQ(cudaStreamSynchronize(first), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
  const cudaStream_t old_handle = first;
  ASSERT_EQ(cudaStreamDestroy(first), cudaSuccess);
  ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  const int64_t replays = set->stats().replays;

  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  auto device_zero = absl::MakeCleanup([] { cudaSetDevice(0); });  // whatever fails below
  std::vector<cudaStream_t> others;
  bool reused = false;
  while (!reused && others.size() < 32) {
    cudaStream_t other = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    others.push_back(other);
    reused = other == old_handle;
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  SCOPED_TRACE(reused ? "a stream of device 1 took the destroyed stream's handle"
                      : "no stream of device 1 took the destroyed stream's handle");
  for (cudaStream_t other : others) {
    const absl::Status status = set->Replay(0, 16, other);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("stream belongs to device 1"));
  }
  EXPECT_EQ(set->stats().replays, replays);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  for (cudaStream_t other : others) EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // Nothing was launched: the output still holds NaN everywhere.
  absl::StatusOr<std::vector<uint16_t>> bits =
      DownloadBits(problem->buffers().output, problem->output_elements());
  ASSERT_TRUE(bits.ok()) << bits.status();
  for (uint16_t b : *bits) ASSERT_EQ(b, 0xffff) << "a refused Replay wrote the output";
}

// The fused path with each Tile configuration forced (at 64 heads x 256 rows the
// warp-specialized one runs one 128-row tile a block; TileKernelTest loops it over 4 at
// 64 heads x 1000 rows): the captured node is found (the capture fails otherwise), replays equal
// the eager tail with the same kernel bit for bit, and they follow a pointer update without a new
// instantiation. The set holds the BMM path's scratch only once a BMM graph was captured: with
// kBmm, not with the fused path or the rule (which picks the fused path at every shape,
// mla/dispatch.h), and never at creation.
TEST_P(GraphGpuTest, BmmScratchOnlyWhenThePathTakesIt) {
  std::unique_ptr<TailGraphSet> set = MakeSet(Options(12, 1, 1, {8, 16}));
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->stats().scratch_bytes, 0);
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 1, 5);
  ASSERT_NE(problem, nullptr);
  ASSERT_OK(set->SetLayer(0, problem->buffers()));
  ASSERT_OK(set->CaptureAll());
  if (GetParam() == TailPath::kBmm) {
    EXPECT_GT(set->stats().scratch_bytes, 0);
  } else {
    EXPECT_EQ(set->stats().scratch_bytes, 0);
  }
}

TEST(GraphTileKernelTest, ReplayEqualsEagerAndFollowsUpdates) {
  MLA_REQUIRE_GPU_OR_SKIP();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  constexpr int kHeads = 64;
  // The sanitizer profile's large bucket, 128 rows, still gives the warp-specialized kernel one
  // tile a block.
  const int large = ForProfile(256, 128);
  std::unique_ptr<Problem> problems[2];
  for (int i = 0; i < 2; ++i) {
    ProblemOptions options;
    options.shape = {kHeads, large, 1};
    options.seed = 111 + i;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream);
    ASSERT_TRUE(problem.ok()) << problem.status();
    problems[i] = *std::move(problem);
  }
  absl::StatusOr<DeviceMemory> eager_output =
      DeviceMemory::Allocate(problems[0]->output_elements() * sizeof(uint16_t));
  ASSERT_TRUE(eager_output.ok());

  std::vector<mla_tail::FusedKernel> kernels;
  for (mla_tail::FusedKernel v : mla_tail::kFusedKernels) {
    if (v != mla_tail::FusedKernel::kColumnSplit) kernels.push_back(v);
  }
  for (mla_tail::FusedKernel kernel : kernels) {
    SCOPED_TRACE(mla_tail::FusedKernelName(kernel));
    GraphSetOptions options;
    options.heads = kHeads;
    options.layers = 1;
    options.buckets = {16, large};
    options.path = TailPath::kFused;
    options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
    ASSERT_TRUE(set.ok()) << set.status();
    mla_tail::TailOptions eager_options;
    eager_options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> eager =
        mla_tail::MlaTail::Create(0, eager_options);
    ASSERT_TRUE(eager.ok()) << eager.status();

    int64_t instantiations = 0;
    for (int i : {0, 1, 0}) {
      const Problem& problem = *problems[i];
      ASSERT_OK((*set)->SetLayer(0, problem.buffers()));
      for (int rows : {16, large}) {
        SCOPED_TRACE(absl::StrCat("problem ", i, " rows ", rows));
        ASSERT_OK(problem.PoisonOutput(problem.buffers().output, stream));
        ASSERT_OK((*set)->Replay(0, rows, stream));
        mla_tail::bf16* out = eager_output->as<mla_tail::bf16>();
        ASSERT_OK(problem.PoisonOutput(out, stream));
        ASSERT_OK((*eager)->Run({kHeads, rows, 1}, problem.buffers_with_output(out), stream,
                                TailPath::kFused));
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        absl::StatusOr<std::vector<uint16_t>> replayed =
            DownloadBits(problem.buffers().output, problem.output_elements());
        absl::StatusOr<std::vector<uint16_t>> eager_bits =
            DownloadBits(out, problem.output_elements());
        ASSERT_TRUE(replayed.ok() && eager_bits.ok());
        ASSERT_TRUE(*replayed == *eager_bits) << "replay differs from the eager tail";
      }
      ASSERT_OK(problem.Check(problem.buffers().output, problem.SampleRows(), true));
      if (instantiations == 0) instantiations = (*set)->stats().instantiations;
    }
    EXPECT_EQ((*set)->stats().instantiations, instantiations);
    EXPECT_EQ((*set)->stats().node_updates, 4);  // two graphs, each updated twice
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Paths, GraphGpuTest,
                         ::testing::Values(TailPath::kFused, TailPath::kBmm, TailPath::kAuto),
                         [](const auto& info) {
                           return std::string(mla_tail::TailPathName(info.param));
                         });

}  // namespace
}  // namespace mla_tail_testing

// The GPU suite of mla/: both paths, every fused kernel and the eager entry point against the
// CPU reference. The default data (problem_data.h) are integers whose sums need bf16's rounding
// and gates over the branch-free sigmoid's range with its edges; "exact" compares with v pinned
// and only the sigmoid allowed its bound (testing/support/reference.h).

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/kernels/params.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gate_math.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::FusedKernel;
using ::mla_tail::TailPath;
using ::testing::HasSubstr;

class MlaGpuTest : public mla_tail_testing::GpuStreamTest<> {
 protected:
  void SetUp() override {
    GpuStreamTest::SetUp();
    if (!StreamReady()) return;
    mla_tail::TailOptions options;
    options.max_rows = 1024;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    ASSERT_TRUE(tail.ok()) << tail.status();
    tail_ = *std::move(tail);
  }

  std::unique_ptr<Problem> MakeProblem(const ProblemOptions& options) {
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  // A tail whose fused path runs `kernel`.
  static std::unique_ptr<mla_tail::MlaTail> FusedTail(FusedKernel kernel) {
    mla_tail::TailOptions options;
    options.max_rows = 1024;
    options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    EXPECT_TRUE(tail.ok()) << tail.status();
    return tail.ok() ? *std::move(tail) : nullptr;
  }

  // Runs `path` into a fresh NaN-poisoned output and checks it; returns the output bits. The
  // output starts two rows (rounded up to 256 bytes, keeping its alignment) into its allocation:
  // those rows before it must still hold NaN, as the guard rows after it must (Problem::Check).
  std::vector<uint16_t> RunAndCheck(const Problem& problem, TailPath path, bool exact,
                                    const std::vector<int>& rows) {
    return RunAndCheckWith(*tail_, problem, path, exact, rows);
  }
  std::vector<uint16_t> RunAndCheckWith(mla_tail::MlaTail& tail, const Problem& problem,
                                        TailPath path, bool exact, const std::vector<int>& rows) {
    const size_t before =
        (2 * static_cast<size_t>(problem.buffers().output_row_stride) + 127) / 128 * 128;
    absl::StatusOr<DeviceMemory> allocation =
        DeviceMemory::Allocate((before + problem.output_elements()) * sizeof(uint16_t));
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    if (!allocation.ok()) return {};
    EXPECT_EQ(cudaMemsetAsync(allocation->get(), 0xff, before * sizeof(uint16_t), stream_),
              cudaSuccess);
    mla_tail::bf16* output = allocation->as<mla_tail::bf16>() + before;
    EXPECT_TRUE(problem.PoisonOutput(output, stream_).ok());
    const absl::Status run =
        tail.Run(problem.shape(), problem.buffers_with_output(output), stream_, path);
    EXPECT_TRUE(run.ok()) << run;
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    const absl::Status check = problem.Check(output, rows, exact);
    EXPECT_TRUE(check.ok()) << mla_tail::TailPathName(path) << ", fused kernel "
                            << mla_tail::FusedKernelName(tail.options().fused_kernel) << ": "
                            << check;
    absl::StatusOr<std::vector<uint16_t>> guard =
        DownloadBits(allocation->as<mla_tail::bf16>(), before);
    EXPECT_TRUE(guard.ok()) << guard.status();
    if (guard.ok()) {
      const int64_t written =
          std::count_if(guard->begin(), guard->end(), [](uint16_t bits) { return bits != 0xffff; });
      EXPECT_EQ(written, 0) << mla_tail::TailPathName(path) << ", fused kernel "
                            << mla_tail::FusedKernelName(tail.options().fused_kernel)
                            << ": elements written before the output";
    }
    absl::StatusOr<std::vector<uint16_t>> bits = DownloadBits(output, problem.output_elements());
    if (!bits.ok()) return {};
    ExpectSameRunOverAFiniteFill(tail, problem, path, *bits);
    return *std::move(bits);
  }

  // The NaN an output is poisoned with is also a result (NaN inputs, gates below the FP32
  // range), so a kernel that skipped storing a NaN result would pass Problem::Check. A second
  // run into an output filled with a finite value (bf16 0x3c3c) must equal the first on every
  // element of the tail (NaN where it was NaN) and leave every other element as filled.
  // Not in the sanitizer profile, whose runs look for memory errors (the plain run compares).
  void ExpectSameRunOverAFiniteFill(mla_tail::MlaTail& tail, const Problem& problem, TailPath path,
                                    const std::vector<uint16_t>& first) {
    if (SanitizerProfile()) return;
    absl::StatusOr<DeviceMemory> output =
        DeviceMemory::Allocate(problem.output_elements() * sizeof(uint16_t));
    ASSERT_TRUE(output.ok()) << output.status();
    ASSERT_EQ(
        cudaMemsetAsync(output->get(), 0x3c, problem.output_elements() * sizeof(uint16_t), stream_),
        cudaSuccess);
    ASSERT_OK(tail.Run(problem.shape(), problem.buffers_with_output(output->as<mla_tail::bf16>()),
                       stream_, path));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> second =
        DownloadBits(output->as<mla_tail::bf16>(), problem.output_elements());
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_EQ(second->size(), first.size());
    const int64_t stride = problem.buffers().output_row_stride;
    const int64_t width = int64_t{problem.shape().heads} * 128;
    int64_t differing = 0;
    for (size_t i = 0; i < first.size(); ++i) {
      const bool tail_element = static_cast<int64_t>(i) / stride < problem.shape().rows &&
                                static_cast<int64_t>(i) % stride < width;
      const uint16_t a = first[i], b = (*second)[i];
      const bool same =
          tail_element ? a == b || ((a & 0x7fff) > 0x7f80 && (b & 0x7fff) > 0x7f80) : b == 0x3c3c;
      if (!same && ++differing <= 5) {
        ADD_FAILURE() << mla_tail::TailPathName(path) << ", fused kernel "
                      << mla_tail::FusedKernelName(tail.options().fused_kernel) << ": element " << i
                      << " (row " << static_cast<int64_t>(i) / stride << ", column "
                      << static_cast<int64_t>(i) % stride << ") 0x" << std::hex << b
                      << " over a finite fill, 0x" << a << " over NaN";
      }
    }
    EXPECT_EQ(differing, 0);
  }

  // Every fused kernel, each forced in a tail of its own.
  static std::vector<std::unique_ptr<mla_tail::MlaTail>> EveryFusedKernel() {
    std::vector<std::unique_ptr<mla_tail::MlaTail>> tails;
    for (FusedKernel kernel : mla_tail::kFusedKernels) tails.push_back(FusedTail(kernel));
    return tails;
  }

  // Runs the BMM path of `bmm` and every tail of `fused` on `problem`: each against the reference
  // on `sample` (exact), and all equal bit for bit (NaN payloads aside).
  void ExpectEveryKernelAndTheBmmPath(mla_tail::MlaTail& bmm,
                                      const std::vector<std::unique_ptr<mla_tail::MlaTail>>& fused,
                                      const Problem& problem, const std::vector<int>& sample) {
    const std::vector<uint16_t> expected =
        RunAndCheckWith(bmm, problem, TailPath::kBmm, true, sample);
    ASSERT_FALSE(expected.empty());
    for (const std::unique_ptr<mla_tail::MlaTail>& tail : fused) {
      ASSERT_NE(tail, nullptr);
      SCOPED_TRACE(mla_tail::FusedKernelName(tail->options().fused_kernel));
      const std::vector<uint16_t> got =
          RunAndCheckWith(*tail, problem, TailPath::kFused, true, sample);
      ASSERT_EQ(got.size(), expected.size());
      int64_t differing = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const bool both_nan = (got[i] & 0x7fff) > 0x7f80 && (expected[i] & 0x7fff) > 0x7f80;
        differing += got[i] != expected[i] && !both_nan;
      }
      EXPECT_EQ(differing, 0) << "elements differing from the BMM path";
    }
  }

  // The problem's own output still holds the NaN it was poisoned with.
  static void ExpectOutputUntouched(const Problem& problem) {
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(problem.buffers().output, problem.output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    for (uint16_t b : *bits) ASSERT_EQ(b, 0xffff) << "the output was written";
  }

  std::unique_ptr<mla_tail::MlaTail> tail_;
};

// Integer-valued data whose sums round in bf16, gates over the sigmoid's range: both paths equal
// to the reference (v exact) and bit for bit to each other, over the grid of heads x rows x q. The
// sanitizer profile keeps rows that reach each of the rule's kernels at some head count
// (ColumnSplit's 8-row blocks at 9 and 17; 64 x 128 tiles at 64 x 100, the 4-stage pipeline at 96 x
// 100, the warp-specialized kernel over two rounds at 128 x 256) and drops the largest batches.
class GridTest : public MlaGpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(GridTest, BothPathsBitExact) {
  const int heads = GetParam();
  for (int q : {1, 2, 4}) {
    for (int rows : ForProfile({1, 2, 7, 8, 9, 15, 16, 17, 32, 33, 64, 100, 256, 1000, 1024},
                               {1, 9, 17, 64, 100, 256})) {
      if (rows % q != 0) continue;
      // The largest batches on a sample of head counts: the CPU reference is the slow part.
      if (rows >= 1000 && heads != 3 && heads != 12 && heads != 64 && heads != 128) continue;
      SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, " q ", q));
      ProblemOptions options;
      options.shape = {heads, rows, q};
      options.seed = heads * 1000 + rows * 10 + q;
      std::unique_ptr<Problem> problem = MakeProblem(options);
      ASSERT_NE(problem, nullptr);
      const std::vector<int> sample = problem->SampleRows(rows >= 1000 && heads >= 64 ? 2 : 4);
      const std::vector<uint16_t> fused = RunAndCheck(*problem, TailPath::kFused, true, sample);
      const std::vector<uint16_t> bmm = RunAndCheck(*problem, TailPath::kBmm, true, sample);
      ASSERT_TRUE(fused == bmm) << "the two paths differ";
      const std::vector<uint16_t> automatic = RunAndCheck(*problem, TailPath::kAuto, true, {});
      ASSERT_TRUE(automatic == fused);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, GridTest, ::testing::Values(1, 3, 8, 12, 16, 63, 64, 96, 128),
                         [](const auto& info) { return absl::StrCat("H", info.param); });

// The fused kernels other than ColumnSplit (Tile's configurations), each forced.
std::vector<FusedKernel> TileKernels() {
  std::vector<FusedKernel> kernels;
  for (FusedKernel v : mla_tail::kFusedKernels) {
    if (v != FusedKernel::kColumnSplit) kernels.push_back(v);
  }
  return kernels;
}

// Each tile kernel against the CPU reference, and bit for bit equal to ColumnSplit, over heads x
// rows x q with rows around the 64- and 128-row tiles' edges. The sanitizer profile keeps the
// edges up to 129 rows (at 128 heads the warp-specialized kernel loops over two rounds). A case
// a (heads, q): the sanitizer runs take each case on its own, and the largest alone outlasted
// their time limit.
class TileKernelTest : public MlaGpuTest,
                       public ::testing::WithParamInterface<std::tuple<int, int>> {};

TEST_P(TileKernelTest, BitExactAndEqualToColumnSplit) {
  const auto [heads, q] = GetParam();
  std::unique_ptr<mla_tail::MlaTail> split = FusedTail(FusedKernel::kColumnSplit);
  ASSERT_NE(split, nullptr);
  std::vector<std::unique_ptr<mla_tail::MlaTail>> tiles;
  for (FusedKernel v : TileKernels()) {
    tiles.push_back(FusedTail(v));
    ASSERT_NE(tiles.back(), nullptr);
  }
  for (int rows : ForProfile({1, 15, 16, 17, 63, 64, 65, 100, 127, 128, 129, 256, 1000},
                             {1, 17, 63, 64, 65, 128, 129})) {
    if (rows % q != 0) continue;
    // The CPU reference is the slow part: the largest batch at two head counts.
    if (rows >= 1000 && heads != 3 && heads != 64) continue;
    SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, " q ", q));
    ProblemOptions options;
    options.shape = {heads, rows, q};
    options.seed = 5 + heads * 1000 + rows * 10 + q;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    const std::vector<int> sample = problem->SampleRows(rows >= 1000 ? 2 : 4);
    const std::vector<uint16_t> expected =
        RunAndCheckWith(*split, *problem, TailPath::kFused, true, sample);
    for (const std::unique_ptr<mla_tail::MlaTail>& tile : tiles) {
      const std::vector<uint16_t> got =
          RunAndCheckWith(*tile, *problem, TailPath::kFused, true, sample);
      ASSERT_TRUE(got == expected)
          << mla_tail::FusedKernelName(tile->options().fused_kernel) << " differs from split";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, TileKernelTest,
                         ::testing::Combine(::testing::Values(1, 3, 12, 63, 64, 128),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return absl::StrCat("H", std::get<0>(info.param), "_q",
                                               std::get<1>(info.param));
                         });

// The tile kernels on the kv_b_proj view of W_UV with padded W_UV, latent, gate and output rows;
// on inactive requests (length 0 or negative, NaN latent and gate); on random data within the
// accumulation bound.
TEST_F(MlaGpuTest, TileKernelStridedInactiveAndRandom) {
  std::unique_ptr<mla_tail::MlaTail> split = FusedTail(FusedKernel::kColumnSplit);
  ASSERT_NE(split, nullptr);
  std::vector<std::unique_ptr<mla_tail::MlaTail>> tiles;
  for (FusedKernel v : TileKernels()) {
    tiles.push_back(FusedTail(v));
    ASSERT_NE(tiles.back(), nullptr);
  }
  for (int heads : ForProfile({1, 12, 63, 128}, {1, 63})) {
    for (int rows : ForProfile({3, 64, 100, 512}, {3, 100})) {
      SCOPED_TRACE(absl::StrCat("strided: heads ", heads, " rows ", rows));
      ProblemOptions options;
      options.shape = {heads, rows, 1};
      options.kv_b_proj_view = true;
      options.row_padding = 8;
      options.w_row_padding = 24;
      options.seed = 17 + heads * rows;
      std::unique_ptr<Problem> problem = MakeProblem(options);
      ASSERT_NE(problem, nullptr);
      const std::vector<int> sample = problem->SampleRows(2);
      const std::vector<uint16_t> expected =
          RunAndCheckWith(*split, *problem, TailPath::kFused, true, sample);
      for (const std::unique_ptr<mla_tail::MlaTail>& tile : tiles) {
        ASSERT_TRUE(RunAndCheckWith(*tile, *problem, TailPath::kFused, true, sample) == expected)
            << mla_tail::FusedKernelName(tile->options().fused_kernel) << " differs from split";
      }
    }
  }
  for (int q : {1, 2, 4}) {
    for (int every : ForProfile({1, 2}, {2})) {
      SCOPED_TRACE(absl::StrCat("inactive: q ", q, " every ", every));
      ProblemOptions options;
      options.shape = {12, ForProfile(128, 64), q};
      options.inactive_every = every;
      options.negative_lengths = q == 2;
      std::unique_ptr<Problem> problem = MakeProblem(options);
      ASSERT_NE(problem, nullptr);
      for (const std::unique_ptr<mla_tail::MlaTail>& tile : tiles) {
        RunAndCheckWith(*tile, *problem, TailPath::kFused, true, problem->SampleRows());
      }
    }
  }
  for (int heads : {12, 128}) {
    for (int rows : ForProfile({64, 1000}, {64})) {
      SCOPED_TRACE(absl::StrCat("random: heads ", heads, " rows ", rows));
      ProblemOptions options;
      options.shape = {heads, rows, 1};
      options.data = Values::kUniform;
      options.gates = Values::kUniformGates;
      options.seed = 23 + heads + rows;
      std::unique_ptr<Problem> problem = MakeProblem(options);
      ASSERT_NE(problem, nullptr);
      for (const std::unique_ptr<mla_tail::MlaTail>& tile : tiles) {
        RunAndCheckWith(*tile, *problem, TailPath::kFused, false, problem->SampleRows(2));
      }
    }
  }
}

// Random data, whose sums FP32 cannot hold exactly: v within the contract's accumulation bound of
// the exact dot product (2^-13 of the sum of the products' magnitudes; any order and grouping).
TEST_F(MlaGpuTest, RandomDataWithinTheAccumulationBound) {
  for (int heads : {1, 12, 64, 128}) {
    for (int rows : ForProfile({1, 17, 256, 1024}, {1, 17, 256})) {
      for (Values gates : {Values::kUniformGates, Values::kGates}) {
        SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows));
        ProblemOptions options;
        options.shape = {heads, rows, 1};
        options.data = Values::kUniform;
        options.gates = gates;
        options.seed = 7 + heads + rows;
        std::unique_ptr<Problem> problem = MakeProblem(options);
        ASSERT_NE(problem, nullptr);
        const std::vector<int> sample = problem->SampleRows(2);
        RunAndCheck(*problem, TailPath::kFused, false, sample);
        RunAndCheck(*problem, TailPath::kBmm, false, sample);
      }
    }
  }
}

// Strides the contract leaves free: with one head, w_head_stride is never applied (0 and 2^40
// are accepted), and the tail equals the one with the problem's stride, through every fused
// kernel and the BMM path.
TEST_F(MlaGpuTest, OneHeadsHeadStrideIsNeverApplied) {
  const std::vector<std::unique_ptr<mla_tail::MlaTail>> fused = EveryFusedKernel();
  for (int rows : {16, 100}) {
    ProblemOptions options;
    options.shape = {1, rows, 1};
    options.seed = 91 + rows;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    for (int64_t stride : {int64_t{0}, int64_t{1} << 40}) {
      SCOPED_TRACE(absl::StrCat("rows ", rows, " w_head_stride ", stride));
      auto run = [&](mla_tail::MlaTail& tail, TailPath path) {
        SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), ", fused kernel ",
                                  mla_tail::FusedKernelName(tail.options().fused_kernel)));
        ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
        mla_tail::TailBuffers b = problem->buffers();
        b.w_head_stride = stride;
        ASSERT_OK(tail.Run(problem->shape(), b, stream_, path));
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
      };
      run(*tail_, TailPath::kBmm);
      run(*tail_, TailPath::kAuto);
      for (const std::unique_ptr<mla_tail::MlaTail>& tail : fused) {
        ASSERT_NE(tail, nullptr);
        run(*tail, TailPath::kFused);
      }
    }
  }
}

// The output placed in a gap of the inputs, which the contract allows: each output row in the
// K half of one head of kv_b_proj (W_UV is its V half). No kernel reads the K half, so every
// fused kernel and the BMM path compute the same bits as into the problem's own output.
TEST_F(MlaGpuTest, OutputInTheKHalfOfKvBProj) {
  const std::vector<std::unique_ptr<mla_tail::MlaTail>> fused = EveryFusedKernel();
  ProblemOptions options;
  options.shape = {12, 8, 1};
  options.kv_b_proj_view = true;
  options.seed = 97;
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  const mla_tail::TailBuffers b = problem->buffers();
  const int width = 12 * 128;
  // Row t of the output at the start of head t's K half: w_uv - 128 rows + t heads.
  mla_tail::TailBuffers in_gap = b;
  in_gap.output = const_cast<mla_tail::bf16*>(b.w_uv) - 128 * b.w_row_stride;
  in_gap.output_row_stride = b.w_head_stride;
  auto run = [&](mla_tail::MlaTail& tail, TailPath path) {
    SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), ", fused kernel ",
                              mla_tail::FusedKernelName(tail.options().fused_kernel)));
    const std::vector<uint16_t> expected =
        RunAndCheckWith(tail, *problem, path, true, problem->SampleRows());
    ASSERT_FALSE(expected.empty());
    ASSERT_OK(tail.Run(problem->shape(), in_gap, stream_, path));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    for (int t = 0; t < 8; ++t) {
      absl::StatusOr<std::vector<uint16_t>> row =
          DownloadBits(in_gap.output + t * in_gap.output_row_stride, width);
      ASSERT_TRUE(row.ok()) << row.status();
      for (int c = 0; c < width; ++c) {
        ASSERT_EQ((*row)[c], expected[static_cast<size_t>(t) * b.output_row_stride + c])
            << "row " << t << " column " << c;
      }
    }
  };
  run(*tail_, TailPath::kBmm);
  for (const std::unique_ptr<mla_tail::MlaTail>& tail : fused) {
    ASSERT_NE(tail, nullptr);
    run(*tail, TailPath::kFused);
  }
}

// W_UV as the V half of a [H, 256, 512] kv_b_proj and with rows wider than 512 (padded), and
// latent, gate and output rows wider than the tail (slices of larger tensors); padding columns
// must stay untouched, and the NaN the padding of every input holds must not be read.
TEST_F(MlaGpuTest, StridedViews) {
  struct Layout {
    bool kv_b_proj_view;
    int64_t row_padding, w_row_padding;
  };
  const Layout layouts[] = {{true, 0, 0}, {true, 8, 8}, {true, 1024, 512}, {false, 0, 64}};
  for (int heads : ForProfile({1, 12, 63, 128}, {1, 63, 128})) {
    for (int rows : ForProfile({3, 16, 100, 512}, {3, 16, 100})) {
      for (const Layout& layout : layouts) {
        SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows, " kv_b_proj ",
                                  layout.kv_b_proj_view, " padding ", layout.row_padding,
                                  " W_UV row padding ", layout.w_row_padding));
        ProblemOptions options;
        options.shape = {heads, rows, 1};
        options.kv_b_proj_view = layout.kv_b_proj_view;
        options.row_padding = layout.row_padding;
        options.w_row_padding = layout.w_row_padding;
        options.seed = 3 + heads * rows + layout.row_padding + layout.w_row_padding;
        std::unique_ptr<Problem> problem = MakeProblem(options);
        ASSERT_NE(problem, nullptr);
        ASSERT_EQ(problem->buffers().w_row_stride, 512 + layout.w_row_padding);
        const std::vector<int> sample = problem->SampleRows(2);
        const std::vector<uint16_t> fused = RunAndCheck(*problem, TailPath::kFused, true, sample);
        const std::vector<uint16_t> bmm = RunAndCheck(*problem, TailPath::kBmm, true, sample);
        ASSERT_TRUE(fused == bmm);
      }
    }
  }
}

// Inactive requests (length 0 or negative) with NaN latent and gate: exactly +0.0, and their
// neighbours unaffected (at 8 and 16 rows, ColumnSplit's 8-row blocks; at 64, a tile kernel); all
// requests inactive too. The sanitizer profile takes every first and third request inactive,
// the latter with negative lengths.
TEST_F(MlaGpuTest, InactiveRowsAreZeroDespiteNan) {
  for (int rows : {8, 16, 64}) {
    for (int q : {1, 2, 4}) {
      for (int every : ForProfile({1, 2, 3}, {1, 3})) {
        for (bool negative : ForProfile({false, true}, {every == 3})) {
          SCOPED_TRACE(absl::StrCat("rows ", rows, " q ", q, " every ", every));
          ProblemOptions options;
          options.shape = {12, rows, q};
          options.inactive_every = every;
          options.negative_lengths = negative;
          std::unique_ptr<Problem> problem = MakeProblem(options);
          ASSERT_NE(problem, nullptr);
          for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
            RunAndCheck(*problem, path, true, problem->SampleRows());
          }
        }
      }
    }
  }
  // Every request inactive.
  ProblemOptions options;
  options.shape = {16, 48, 3};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  ASSERT_OK(problem->SetLengths(std::vector<int32_t>(16, 0), stream_));
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    RunAndCheck(*problem, path, true, problem->SampleRows());
  }
}

// Lengths are read at run time: a second run with other lengths follows them.
TEST_F(MlaGpuTest, LengthsAreReadAtRunTime) {
  ProblemOptions options;
  options.shape = {8, 32, 2};
  options.inactive_every = 0;
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
    std::vector<int32_t> lengths(16, 5);
    ASSERT_OK(problem->SetLengths(lengths, stream_));
    RunAndCheck(*problem, path, true, problem->SampleRows());
    lengths[3] = 0;
    lengths[15] = 0;
    ASSERT_OK(problem->SetLengths(lengths, stream_));
    RunAndCheck(*problem, path, true, problem->SampleRows());
  }
}

// Every validation failure returns its status and launches nothing: a sentinel output stays.
TEST_F(MlaGpuTest, ValidationErrorsLaunchNothing) {
  ProblemOptions options;
  options.shape = {12, 32, 2};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  struct Case {
    const char* message;
    mla_tail::TailShape shape;
    void (*mutate)(mla_tail::TailBuffers&);
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const mla_tail::TailShape good = problem->shape();
  const Case cases[] = {
      {"heads = 0", {0, 32, 2}, [](mla_tail::TailBuffers&) {}},
      {"heads = 129", {129, 32, 2}, [](mla_tail::TailBuffers&) {}},
      {"rows = 0", {12, 0, 2}, [](mla_tail::TailBuffers&) {}},
      {"q = 0", {12, 32, 0}, [](mla_tail::TailBuffers&) {}},
      {"not a multiple of q", {12, 31, 2}, [](mla_tail::TailBuffers&) {}},
      {"latent is null", good, [](mla_tail::TailBuffers& b) { b.latent = nullptr; }},
      {"w_uv is null", good, [](mla_tail::TailBuffers& b) { b.w_uv = nullptr; }},
      {"row_count = ", good,
       [](mla_tail::TailBuffers& b) {
         b.row_count =
             reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(b.lengths) + 2);
       }},
      {"lengths is null", good, [](mla_tail::TailBuffers& b) { b.lengths = nullptr; }},
      {"latent = ", good, [](mla_tail::TailBuffers& b) { b.latent += 4; }},
      {"gate = ", good, [](mla_tail::TailBuffers& b) { b.gate += 1; }},
      {"w_uv = ", good, [](mla_tail::TailBuffers& b) { b.w_uv += 2; }},
      {"latent_row_stride", good, [](mla_tail::TailBuffers& b) { b.latent_row_stride -= 8; }},
      {"gate_row_stride", good, [](mla_tail::TailBuffers& b) { b.gate_row_stride += 4; }},
      {"output_row_stride", good, [](mla_tail::TailBuffers& b) { b.output_row_stride -= 8; }},
      {"w_head_stride", good, [](mla_tail::TailBuffers& b) { b.w_head_stride = 512; }},
      {"w_row_stride", good, [](mla_tail::TailBuffers& b) { b.w_row_stride = 500; }},
      {"output overlaps gate", good, [](mla_tail::TailBuffers& b) { b.gate = b.output + 8; }},
      {"output overlaps w_uv", good, [](mla_tail::TailBuffers& b) { b.w_uv = b.output + 1024; }},
      {"output overlaps lengths", good,
       [](mla_tail::TailBuffers& b) {
         b.lengths = reinterpret_cast<const int32_t*>(b.output + 6);
       }},
  };
  for (TailPath path : {TailPath::kFused, TailPath::kBmm, TailPath::kAuto}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.message);
      ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
      mla_tail::TailBuffers buffers = problem->buffers();
      c.mutate(buffers);
      const absl::Status status = tail_->Run(c.shape, buffers, stream_, path);
      EXPECT_EQ(status.code(), c.code) << status;
      EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ExpectOutputUntouched(*problem);
    }
  }
  // A path value that names none.
  ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
  const absl::Status no_path =
      tail_->Run(good, problem->buffers(), stream_, static_cast<TailPath>(7));
  EXPECT_EQ(no_path.code(), absl::StatusCode::kInvalidArgument) << no_path;
  EXPECT_THAT(std::string(no_path.message()), HasSubstr("not a TailPath"));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ExpectOutputUntouched(*problem);
}

// The BMM path's scratch bounds it; asking for more is OutOfRange, launches nothing, and the
// fused path still serves the shape.
TEST_F(MlaGpuTest, BmmBeyondCapacityIsOutOfRange) {
  mla_tail::TailOptions options;
  options.max_rows = 64;
  options.max_heads = 16;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> small = mla_tail::MlaTail::Create(0, options);
  ASSERT_TRUE(small.ok()) << small.status();
  for (mla_tail::TailShape shape :
       {mla_tail::TailShape{16, 80, 1}, mla_tail::TailShape{32, 32, 1}}) {
    ProblemOptions problem_options;
    problem_options.shape = shape;
    std::unique_ptr<Problem> problem = MakeProblem(problem_options);
    ASSERT_NE(problem, nullptr);
    const absl::Status status =
        (*small)->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ExpectOutputUntouched(*problem);
    ASSERT_OK((*small)->Run(problem->shape(), problem->buffers(), stream_, TailPath::kFused));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
  }
}

// Without the BMM path (TailOptions::bmm = false) nothing is allocated; that path is refused
// with FailedPrecondition before anything is launched, and the fused and automatic paths run.
// With it, the scratch (the values, the cuBLASLt workspace and the operand tables) is allocated
// when the BMM path is first prepared, not before.
TEST_F(MlaGpuTest, WithoutBmmScratchTheBmmPathIsRefused) {
  mla_tail::TailOptions options;
  options.bmm = false;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> fused_only =
      mla_tail::MlaTail::Create(0, options);
  ASSERT_TRUE(fused_only.ok()) << fused_only.status();
  EXPECT_EQ((*fused_only)->scratch_bytes(), 0u);
  for (mla_tail::TailShape shape :
       {mla_tail::TailShape{12, 8, 1}, mla_tail::TailShape{64, 256, 2}}) {
    SCOPED_TRACE(absl::StrCat("heads ", shape.heads, " rows ", shape.rows));
    ProblemOptions problem_options;
    problem_options.shape = shape;
    std::unique_ptr<Problem> problem = MakeProblem(problem_options);
    ASSERT_NE(problem, nullptr);
    const absl::Status refused =
        (*fused_only)->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("TailOptions::bmm"));
    EXPECT_EQ((*fused_only)->PrepareBmm(problem->shape(), problem->buffers()).code(),
              absl::StatusCode::kFailedPrecondition);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ExpectOutputUntouched(*problem);
    for (TailPath path : {TailPath::kFused, TailPath::kAuto}) {
      ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
      ASSERT_OK((*fused_only)->Run(problem->shape(), problem->buffers(), stream_, path));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
    }
  }
  // With it, nothing is allocated until the BMM path is first prepared.
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> both = mla_tail::MlaTail::Create(0, {});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ((*both)->scratch_bytes(), 0u);
  ProblemOptions problem_options;
  problem_options.shape = {12, 8, 1};
  std::unique_ptr<Problem> problem = MakeProblem(problem_options);
  ASSERT_NE(problem, nullptr);
  ASSERT_OK((*both)->Run(problem->shape(), problem->buffers(), stream_));
  EXPECT_EQ((*both)->scratch_bytes(), 0u) << "the fused path allocated";
  ASSERT_OK((*both)->PrepareBmm(problem->shape(), problem->buffers()));
  const mla_tail::TailOptions defaults;
  EXPECT_EQ((*both)->scratch_bytes(),
            defaults.workspace_bytes +
                size_t{mla_tail::kMaxHeads} * 1024 * mla_tail::kValueDim * 2 +
                mla_tail::internal::kOperandTableBytes);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

TEST_F(MlaGpuTest, CreateRefusesBadOptionsAndDevices) {
  mla_tail::TailOptions options;
  options.max_heads = 0;
  EXPECT_EQ(mla_tail::MlaTail::Create(0, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.max_rows = 0;
  EXPECT_EQ(mla_tail::MlaTail::Create(0, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const absl::Status missing = mla_tail::MlaTail::Create(count, {}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.message()), HasSubstr(absl::StrCat("device ", count)));
}

// With two GPUs: a stream of the other device is refused before anything is launched.
TEST_F(MlaGpuTest, StreamOfAnotherDeviceIsRefused) {
  MLA_REQUIRE_GPUS_OR_SKIP(2);
  ProblemOptions options;
  options.shape = {4, 16, 1};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  auto device_zero = absl::MakeCleanup([] { cudaSetDevice(0); });  // whatever fails below
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const absl::Status status = tail_->Run(problem->shape(), problem->buffers(), other);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("stream belongs to device 1"));
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ExpectOutputUntouched(*problem);
  cudaStreamDestroy(other);
}

// The data the CPU tests measure (testing/wrong_tails_test.cc computes them on the host,
// problem_data.h) are the data on the device, special values and padding included.
TEST_F(MlaGpuTest, ProblemDataEqualTheHostModel) {
  ProblemOptions plain;
  plain.shape = {12, 16, 1};
  ProblemOptions strided;
  strided.shape = {3, 30, 3};
  strided.kv_b_proj_view = true;
  strided.row_padding = 8;
  strided.w_row_padding = 16;
  strided.inactive_every = 2;
  strided.negative_lengths = true;
  strided.special_values = true;
  strided.gates = Values::kGatesWithInfinities;
  strided.seed = 9;
  for (const ProblemOptions& options : {plain, strided}) {
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    const ReferenceInputs device = problem->reference_inputs();
    const ReferenceInputs host = HostReferenceInputs(options);
    const int rows = options.shape.rows, heads = options.shape.heads;
    for (int r = 0; r < rows / options.shape.q; ++r) {
      ASSERT_EQ(device.lengths(r), host.lengths(r)) << "request " << r;
    }
    for (int t = 0; t < rows; ++t) {
      for (int h = 0; h < heads; ++h) {
        for (int k = 0; k < mla_tail::kLatentDim; ++k) {
          ASSERT_EQ(device.latent(t, h, k), host.latent(t, h, k)) << t << " " << h << " " << k;
        }
      }
      for (int c = 0; c < heads * mla_tail::kValueDim; ++c) {
        ASSERT_EQ(device.gate(t, c), host.gate(t, c)) << t << " " << c;
      }
    }
    for (int h = 0; h < heads; ++h) {
      for (int k = 0; k < mla_tail::kLatentDim; ++k) {
        for (int d = 0; d < mla_tail::kValueDim; ++d) {
          ASSERT_EQ(device.w_uv(h, k, d), host.w_uv(h, k, d)) << h << " " << k << " " << d;
        }
      }
    }
  }
}

// Beyond 1024 rows, up to the contract's limit of 65,536: the rule's kernel, every forced fused
// kernel and the BMM path against the reference on sampled rows, all equal bit for bit. q not a
// power of two among them. The sanitizer profile keeps two batches of a few thousand rows.
TEST_F(MlaGpuTest, LargeBatchesUpToTheRowLimit) {
  struct Case {
    int heads, rows, q;
  };
  for (const Case& c : ForProfile<Case>({{3, 1025, 1},
                                         {64, 2048, 2},
                                         {128, 3000, 3},
                                         {12, 4096, 4},
                                         {8, 65520, 5},
                                         {16, mla_tail::kMaxRows, 1}},
                                        {{12, 2048, 1}, {3, 4100, 2}})) {
    SCOPED_TRACE(absl::StrCat("heads ", c.heads, " rows ", c.rows, " q ", c.q));
    ProblemOptions options;
    options.shape = {c.heads, c.rows, c.q};
    options.seed = 31 + c.rows;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    mla_tail::TailOptions bmm_options;
    bmm_options.max_heads = c.heads;
    bmm_options.max_rows = c.rows;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> bmm =
        mla_tail::MlaTail::Create(0, bmm_options);
    ASSERT_TRUE(bmm.ok()) << bmm.status();
    const std::vector<uint16_t> automatic =
        RunAndCheckWith(**bmm, *problem, TailPath::kAuto, true, problem->SampleRows(2));
    ExpectEveryKernelAndTheBmmPath(**bmm, EveryFusedKernel(), *problem, problem->SampleRows(2));
    ASSERT_TRUE(RunAndCheckWith(**bmm, *problem, TailPath::kBmm, true, {}) == automatic);
  }
}

// Speculative decoding: q that is not a power of two, and q beyond 4 up to the limit of 64, with
// active, inactive and negative lengths mixed among the requests.
TEST_F(MlaGpuTest, QNotAPowerOfTwoAndAboveFour) {
  const std::vector<std::unique_ptr<mla_tail::MlaTail>> fused = EveryFusedKernel();
  for (int q : ForProfile({3, 5, 6, 7, 8, 12, 64}, {3, 8, 64})) {
    for (int requests : ForProfile({1, 3, 7, 15}, {3, 15})) {
      const int heads = (q + requests) % 2 == 0 ? 12 : 63;
      SCOPED_TRACE(absl::StrCat("q ", q, " requests ", requests, " heads ", heads));
      ProblemOptions options;
      options.shape = {heads, q * requests, q};
      options.inactive_every = requests % 2 == 1 ? 2 : 3;
      options.negative_lengths = q % 2 == 1;
      options.seed = 41 + q * 100 + requests;
      std::unique_ptr<Problem> problem = MakeProblem(options);
      ASSERT_NE(problem, nullptr);
      ExpectEveryKernelAndTheBmmPath(*tail_, fused, *problem, problem->SampleRows());
    }
  }
}

// NaN in an active row's latent (one head) and in a W_UV column, and +inf, -inf and NaN gates in
// active rows, through every fused kernel and the BMM path: NaN exactly where the contract
// propagates it, sigmoid(+inf) = 1, sigmoid(-inf) = 0 with the sign of v, every other element as
// without them.
TEST_F(MlaGpuTest, NanAndInfinitiesThroughEveryKernel) {
  const std::vector<std::unique_ptr<mla_tail::MlaTail>> fused = EveryFusedKernel();
  struct Case {
    int heads, rows, q;
  };
  for (const Case& c : ForProfile<Case>({{12, 16, 1}, {3, 100, 2}, {64, 256, 1}, {128, 9, 1}},
                                        {{12, 16, 1}, {3, 100, 2}})) {
    SCOPED_TRACE(absl::StrCat("heads ", c.heads, " rows ", c.rows, " q ", c.q));
    ProblemOptions options;
    options.shape = {c.heads, c.rows, c.q};
    options.special_values = true;
    options.gates = Values::kGatesWithInfinities;
    options.seed = 51 + c.rows;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    ExpectEveryKernelAndTheBmmPath(*tail_, fused, *problem, problem->SampleRows());
  }
}

// Every bf16 gate through every fused kernel's epilogue and the BMM path's gate kernel: the
// gated output equals GatePair (the contract's bf16(v · sigmoid(g)), the sigmoid the IEEE
// division) of the same kernel's ungated output v, bit for bit (NaN for NaN), so the kernels'
// epilogues, and not only device.cuh's helpers, compute the contract's gate. The gate at (t, c)
// holds bits (t · width + c) · 40503 mod 2^16: at 64 heads x 8 rows each of the 65,536 bf16
// gates once, scattered over the kernels' thread layouts; at 128 heads x 64 rows each 64 times.
TEST_F(MlaGpuTest, EveryKernelGatesEveryBf16GateAsTheContract) {
  const std::vector<std::unique_ptr<mla_tail::MlaTail>> fused = EveryFusedKernel();
  struct Case {
    int heads, rows;
  };
  for (const Case& c : ForProfile<Case>({{64, 8}, {128, 64}}, {{64, 8}})) {
    SCOPED_TRACE(absl::StrCat("heads ", c.heads, " rows ", c.rows));
    ProblemOptions options;
    options.shape = {c.heads, c.rows, 1};
    options.seed = 77 + c.rows;
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    const mla_tail::TailBuffers b = problem->buffers();
    const int width = c.heads * 128;
    std::vector<uint16_t> gates(static_cast<size_t>(c.rows) * width);
    for (size_t i = 0; i < gates.size(); ++i) {
      gates[i] = static_cast<uint16_t>((i * 40503u) & 0xFFFFu);
    }
    ASSERT_EQ(
        cudaMemcpy2DAsync(const_cast<mla_tail::bf16*>(b.gate), b.gate_row_stride * 2, gates.data(),
                          width * 2, width * 2, c.rows, cudaMemcpyHostToDevice, stream_),
        cudaSuccess);
    mla_tail::TailBuffers ungated = b;
    ungated.gate = nullptr;

    auto check = [&](mla_tail::MlaTail& tail, TailPath path) {
      absl::StatusOr<DeviceMemory> values = problem->NewOutput(stream_);
      absl::StatusOr<DeviceMemory> gated = problem->NewOutput(stream_);
      absl::StatusOr<DeviceMemory> expected = problem->NewOutput(stream_);
      ASSERT_TRUE(values.ok() && gated.ok() && expected.ok());
      ungated.output = values->as<mla_tail::bf16>();
      ASSERT_OK(tail.Run(problem->shape(), ungated, stream_, path));
      ASSERT_OK(tail.Run(problem->shape(),
                         problem->buffers_with_output(gated->as<mla_tail::bf16>()), stream_, path));
      ASSERT_EQ(
          GateOutputs(values->as<uint16_t>(), b.output_row_stride,
                      reinterpret_cast<const uint16_t*>(b.gate), b.gate_row_stride, b.lengths, 1,
                      c.rows, width, expected->as<uint16_t>(), b.output_row_stride, stream_),
          cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      absl::StatusOr<std::vector<uint16_t>> got =
          DownloadBits(gated->as<mla_tail::bf16>(), problem->output_elements());
      absl::StatusOr<std::vector<uint16_t>> want =
          DownloadBits(expected->as<mla_tail::bf16>(), problem->output_elements());
      ASSERT_TRUE(got.ok() && want.ok());
      int64_t differing = 0;
      for (int t = 0; t < c.rows; ++t) {
        for (int col = 0; col < width; ++col) {
          const size_t i = static_cast<size_t>(t) * b.output_row_stride + col;
          const uint16_t g = (*got)[i], w = (*want)[i];
          const bool both_nan = (g & 0x7fff) > 0x7f80 && (w & 0x7fff) > 0x7f80;
          if (g != w && !both_nan && ++differing <= 5) {
            ADD_FAILURE() << "row " << t << " column " << col << ": 0x" << std::hex << g
                          << ", GatePair of the ungated output 0x" << w << " (gate 0x"
                          << gates[static_cast<size_t>(t) * width + col] << ")";
          }
        }
      }
      EXPECT_EQ(differing, 0);
    };
    {
      SCOPED_TRACE("the BMM path");
      check(*tail_, TailPath::kBmm);
    }
    for (const std::unique_ptr<mla_tail::MlaTail>& tail : fused) {
      ASSERT_NE(tail, nullptr);
      SCOPED_TRACE(mla_tail::FusedKernelName(tail->options().fused_kernel));
      check(*tail, TailPath::kFused);
    }
  }
}

// A gate sliced from a wider row whose other half is the output: the rows interleave without
// sharing a byte, which the contract allows. Every fused kernel and the BMM path compute the
// tail, and the gate's bytes stay as they were.
TEST_F(MlaGpuTest, GateAndOutputInterleavedInOneRow) {
  const std::vector<std::unique_ptr<mla_tail::MlaTail>> fused = EveryFusedKernel();
  for (const auto& [heads, rows] : {std::pair{12, 64}, std::pair{3, 17}}) {
    SCOPED_TRACE(absl::StrCat("heads ", heads, " rows ", rows));
    ProblemOptions options;
    options.shape = {heads, rows, 1};
    std::unique_ptr<Problem> problem = MakeProblem(options);
    ASSERT_NE(problem, nullptr);
    const mla_tail::TailBuffers own = problem->buffers();
    const int64_t width = int64_t{heads} * mla_tail::kValueDim, stride = 2 * width;
    absl::StatusOr<DeviceMemory> rows_memory = DeviceMemory::Allocate(rows * stride * 2);
    ASSERT_TRUE(rows_memory.ok()) << rows_memory.status();
    mla_tail::bf16* wide = rows_memory->as<mla_tail::bf16>();
    // Every byte defined (the output halves are rewritten before each run), so that the whole
    // rows can be compared before and after.
    // On the test's stream: device-to-device copies and memsets of the legacy stream return
    // before they are done and are not ordered with the non-blocking stream.
    ASSERT_EQ(cudaMemsetAsync(wide, 0xff, rows * stride * 2, stream_), cudaSuccess);
    ASSERT_EQ(cudaMemcpy2DAsync(wide, stride * 2, own.gate, own.gate_row_stride * 2, width * 2,
                                rows, cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    mla_tail::TailBuffers interleaved = own;
    interleaved.gate = wide;
    interleaved.gate_row_stride = stride;
    interleaved.output = wide + width;
    interleaved.output_row_stride = stride;
    ASSERT_OK(mla_tail::ValidateTail(problem->shape(), interleaved));
    absl::StatusOr<std::vector<uint16_t>> before = DownloadBits(wide, rows * stride);
    ASSERT_TRUE(before.ok());

    std::vector<std::pair<mla_tail::MlaTail*, TailPath>> runs = {{tail_.get(), TailPath::kBmm}};
    for (const std::unique_ptr<mla_tail::MlaTail>& tail : fused) {
      runs.push_back({tail.get(), TailPath::kFused});
    }
    for (const auto& [tail, path] : runs) {
      SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), " ",
                                mla_tail::FusedKernelName(tail->options().fused_kernel)));
      ASSERT_EQ(cudaMemset2DAsync(wide + width, stride * 2, 0xff, width * 2, rows, stream_),
                cudaSuccess);
      ASSERT_OK(tail->Run(problem->shape(), interleaved, stream_, path));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      // The output half into the problem's own output layout, for its check.
      ASSERT_OK(problem->PoisonOutput(own.output, stream_));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_EQ(cudaMemcpy2DAsync(own.output, own.output_row_stride * 2, wide + width, stride * 2,
                                  width * 2, rows, cudaMemcpyDeviceToDevice, stream_),
                cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(problem->Check(own.output, problem->SampleRows(), true));
      absl::StatusOr<std::vector<uint16_t>> after = DownloadBits(wide, rows * stride);
      ASSERT_TRUE(after.ok());
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t c = 0; c < width; ++c) {
          ASSERT_EQ((*after)[t * stride + c], (*before)[t * stride + c])
              << "the gate's row " << t << " column " << c << " was written";
        }
      }
    }
  }
}

// CheckStream accepts the legacy and per-thread default streams (which the instance's device
// guard makes its own device's), a stream of its device, and a capturing stream; Run on each
// default stream computes the tail on both paths.
TEST_F(MlaGpuTest, DefaultStreamsAndCheckStream) {
  EXPECT_OK(tail_->CheckStream(nullptr));
  EXPECT_OK(tail_->CheckStream(cudaStreamLegacy));
  EXPECT_OK(tail_->CheckStream(cudaStreamPerThread));
  EXPECT_OK(tail_->CheckStream(stream_));
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status capturing = tail_->CheckStream(stream_);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_OK(capturing);

  ProblemOptions options;
  options.shape = {12, 24, 2};
  std::unique_ptr<Problem> problem = MakeProblem(options);
  ASSERT_NE(problem, nullptr);
  for (cudaStream_t stream : {cudaStream_t{nullptr}, cudaStreamLegacy, cudaStreamPerThread}) {
    for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
      SCOPED_TRACE(absl::StrCat(stream == nullptr            ? "stream 0"
                                : stream == cudaStreamLegacy ? "cudaStreamLegacy"
                                                             : "cudaStreamPerThread",
                                ", ", mla_tail::TailPathName(path)));
      ASSERT_OK(problem->PoisonOutput(problem->buffers().output, stream_));
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(tail_->Run(problem->shape(), problem->buffers(), stream, path));
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
    }
  }
}

}  // namespace
}  // namespace mla_tail_testing

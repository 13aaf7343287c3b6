// TailGraphSet's option checks, which run before any CUDA call (CPU only: no GPU needed).

#include "mla_tail/graph/tail_graph_set.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mla_tail {
namespace {

using ::testing::HasSubstr;

GraphSetOptions Valid() {
  GraphSetOptions options;
  options.heads = 12;
  options.q = 1;
  options.layers = 2;
  return options;
}

void ExpectRefused(const GraphSetOptions& options, const std::string& naming) {
  const absl::Status status = TailGraphSet::Create(0, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(naming));
}

TEST(TailGraphSetOptionsTest, QOutsideItsRangeIsRefusedWithDefaultBuckets) {
  for (int q : {0, -1, 65}) {
    GraphSetOptions options = Valid();
    options.q = q;
    ExpectRefused(options, "q = ");
  }
}

TEST(TailGraphSetOptionsTest, BadOptionsAreRefused) {
  GraphSetOptions options = Valid();
  options.heads = 0;
  ExpectRefused(options, "heads");
  options = Valid();
  options.heads = 129;
  ExpectRefused(options, "heads");
  options = Valid();
  options.layers = 0;
  ExpectRefused(options, "layers");
  options = Valid();
  options.buckets = {8, 4};
  ExpectRefused(options, "increasing");
  options = Valid();
  options.q = 2;
  options.buckets = {2, 3};
  ExpectRefused(options, "not a multiple of q");
  options = Valid();
  options.q = 2;
  options.max_eager_rows = 3;
  ExpectRefused(options, "max_eager_rows");
  options = Valid();
  options.max_eager_rows = -1;
  ExpectRefused(options, "max_eager_rows");
  options = Valid();
  options.max_eager_rows = kMaxRows + 1;  // by its own name, not as the tail's max_rows
  ExpectRefused(options, "max_eager_rows = 65537");
  options = Valid();
  options.path = static_cast<TailPath>(7);
  ExpectRefused(options, "not a TailPath");
  options = Valid();
  options.fused_kernel = static_cast<FusedKernel>(99);
  ExpectRefused(options, "not a FusedKernel");
}

// The set's host state grows with layers x buckets: both are bounded before anything is built.
TEST(TailGraphSetOptionsTest, LayersAndGraphsAreBounded) {
  GraphSetOptions options = Valid();
  for (int layers : {kMaxGraphSetLayers + 1, std::numeric_limits<int>::max()}) {
    options.layers = layers;
    ExpectRefused(options, "layers = ");
  }
  options = Valid();
  options.layers = kMaxGraphSetLayers;
  options.buckets.clear();
  for (int rows = 1; rows <= 1024; ++rows) options.buckets.push_back(rows);
  ExpectRefused(options, "graphs");
}

}  // namespace
}  // namespace mla_tail

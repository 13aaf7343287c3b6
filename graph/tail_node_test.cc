// TailNode as a value in containers (CPU only: an empty handle makes no CUDA call).

#include "mla_tail/graph/tail_node.h"

#include <vector>

#include "gtest/gtest.h"

namespace mla_tail {
namespace {

TEST(TailNodeTest, EmptyHandlesFillAContainer) {
  std::vector<TailNode> layers(61);
  ASSERT_EQ(layers.size(), 61u);
  for (const TailNode& node : layers) {
    EXPECT_TRUE(node.empty());
    EXPECT_EQ(node.node(), nullptr);
  }
  layers.resize(64);
  layers.emplace_back();
  EXPECT_TRUE(layers.back().empty());
}

TEST(TailNodeTest, AnEmptyHandleRefusesUpdatesCleanly) {
  TailNode node;
  TailBuffers buffers;  // never looked at: the handle is empty
  // Any non-null exec: the empty handle is refused before it is used.
  const auto exec = reinterpret_cast<cudaGraphExec_t>(uintptr_t{0x1000});
  for (const absl::Status& status :
       {node.Update(exec, buffers), node.Update(nullptr, buffers), node.UpdateGraph(buffers)}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find("empty"), absl::string_view::npos) << status;
  }
  EXPECT_TRUE(node.empty());
}

}  // namespace
}  // namespace mla_tail

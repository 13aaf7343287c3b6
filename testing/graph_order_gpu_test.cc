// The ordering a graph edge gives, with two plain kernels and nothing of the library: a writer
// that lets its dependents launch at once and writes a buffer 50 us later, and a reader behind
// it that counts the words it sees without the writer's value. Behind a full edge the reader
// starts after the writer has completed; behind a programmatic edge it may start early, and its
// griddepcontrol.wait returns once the writer has completed and its writes are visible. Either
// way no word may be stale. The nodes are built the ways the library's tests build them:
// captured from stream launches, added with cudaGraphAddNode, or the writer captured and the
// reader added (as EmbeddingGpuTest.AddedNodesRunAfterTheUpstreamKernel adds the tail).
//
// Run under compute-sanitizer (memcheck, racecheck, synccheck), this shows whether a stale read
// seen there behind a full edge comes from the tools or from the graph.

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "testing/graph_order_kernels.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"

namespace mla_tail_testing {
namespace {

struct EdgeCase {
  const char* name;
  bool capture_writer;  // else added with cudaGraphAddNode
  bool capture_reader;  // else added with cudaGraphAddNode after the writer's node
  bool programmatic;    // the edge (captured: the reader launched with PDL)
  bool reader_waits;    // griddepcontrol.wait before reading
};

const EdgeCase kEdgeCases[] = {
    {"CapturedWriterAddedReaderFullEdge", true, false, false, true},
    {"CapturedWriterAddedReaderFullEdgeNoWait", true, false, false, false},
    {"AddedNodesFullEdge", false, false, false, true},
    {"CapturedNodesFullEdge", true, true, false, true},
    {"AddedNodesProgrammaticEdge", false, false, true, true},
    {"CapturedNodesProgrammaticEdge", true, true, true, true},
};

class GraphOrderGpuTest : public GpuStreamTest<::testing::TestWithParam<EdgeCase>> {};

cudaGraphNodeParams KernelNode(const void* kernel, unsigned blocks, void** arguments) {
  cudaGraphNodeParams node = {};
  node.type = cudaGraphNodeTypeKernel;
  node.kernel.func = const_cast<void*>(kernel);
  node.kernel.gridDim = dim3(blocks);
  node.kernel.blockDim = dim3(kThreads);
  node.kernel.kernelParams = arguments;
  return node;
}

TEST_P(GraphOrderGpuTest, ReaderBehindTheEdgeSeesEveryWrite) {
  if (!StreamReady()) return;
  const EdgeCase& v = GetParam();
  constexpr size_t kWords = size_t{1} << 18;  // 1 MiB
  constexpr uint32_t kValue = 0x5a5a5a5a;
  uint32_t* buffer = nullptr;
  unsigned long long* stale = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, kWords * sizeof(uint32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&stale, sizeof(*stale)), cudaSuccess);
  LateWrite write{buffer, kWords, kValue, 50000, /*trigger_first=*/true};
  StaleRead read{buffer, kWords, kValue, stale, v.reader_waits};

  cudaGraph_t graph = nullptr;
  cudaGraphNode_t writer = nullptr, reader = nullptr;
  if (v.capture_writer) {
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    ASSERT_EQ(LaunchLateWrite(write, /*pdl=*/false, stream_), cudaSuccess);
    if (v.capture_reader) {
      ASSERT_EQ(LaunchStaleRead(read, v.programmatic, stream_), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
    size_t count = 1;
    ASSERT_EQ(cudaGraphGetRootNodes(graph, &writer, &count), cudaSuccess);
    ASSERT_EQ(count, 1u);
  } else {
    ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
    void* arguments[] = {&write};
    cudaGraphNodeParams node = KernelNode(LateWriteKernel(), kWriterBlocks, arguments);
    ASSERT_EQ(cudaGraphAddNode(&writer, graph, nullptr, nullptr, 0, &node), cudaSuccess);
  }
  if (v.capture_reader) {
    size_t count = 1;
    ASSERT_EQ(cudaGraphNodeGetDependentNodes(writer, &reader, nullptr, &count), cudaSuccess);
    ASSERT_EQ(count, 1u);
  } else {
    void* arguments[] = {&read};
    cudaGraphNodeParams node = KernelNode(StaleReadKernel(), kReaderBlocks, arguments);
    cudaGraphEdgeData edge = {};
    if (v.programmatic) {
      edge.from_port = cudaGraphKernelNodePortProgrammatic;
      edge.type = cudaGraphDependencyTypeProgrammatic;
    }
    ASSERT_EQ(cudaGraphAddNode(&reader, graph, &writer, &edge, 1, &node), cudaSuccess);
  }
  cudaGraphNode_t dependency = nullptr;
  cudaGraphEdgeData edge = {};
  size_t count = 1;
  ASSERT_EQ(cudaGraphNodeGetDependencies(reader, &dependency, &edge, &count), cudaSuccess);
  ASSERT_EQ(count, 1u);
  ASSERT_EQ(dependency, writer);
  ASSERT_EQ(edge.type,
            v.programmatic ? cudaGraphDependencyTypeProgrammatic : cudaGraphDependencyTypeDefault);

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  const int rounds = ForProfile(50, 10);
  unsigned long long total = 0;
  int stale_rounds = 0;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_EQ(cudaMemsetAsync(buffer, 0, kWords * sizeof(uint32_t), stream_), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(stale, 0, sizeof(*stale), stream_), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
    unsigned long long seen = 0;
    ASSERT_EQ(cudaMemcpyAsync(&seen, stale, sizeof(seen), cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    total += seen;
    stale_rounds += seen != 0;
  }
  RecordProperty("stale_words", std::to_string(total));
  RecordProperty("stale_rounds", stale_rounds);
  EXPECT_EQ(total, 0u) << v.name << ": the reader saw " << total << " stale words in "
                       << stale_rounds << " of " << rounds << " rounds";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(stale);
  cudaFree(buffer);
}

INSTANTIATE_TEST_SUITE_P(Edges, GraphOrderGpuTest, ::testing::ValuesIn(kEdgeCases),
                         [](const ::testing::TestParamInfo<EdgeCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace mla_tail_testing

#ifndef MLA_TAIL_EXAMPLES_EMBEDDING_SNIPPETS_H_
#define MLA_TAIL_EXAMPLES_EMBEDDING_SNIPPETS_H_

// Three ways a serving runtime embeds the tail, short enough to quote: each function uses only
// the public headers and public targets (//mla:tail, //graph:tail_graph_set,
// //graph:tail_node), and the test suite compiles and runs them (embedding_snippets_test.cc).

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail_examples {

// A layer's tensors as the tail sees them: the latent [B, H, 512], W_UV as the V half of an
// absorbed [H, 256, 512] kv_b_proj, a gate sliced from a wider projection row, and the output.
mla_tail::TailBuffers LayerBuffers(int heads, const mla_tail::bf16* latent,
                                   const mla_tail::bf16* kv_b_proj, const mla_tail::bf16* gate,
                                   int64_t gate_width, const int32_t* lengths, mla_tail::bf16* out);

// Once per device: the eager tail (checks the GPU, loads the kernels; allocates nothing).
absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> MakeTail(int device);

// (a) The runtime captures its decode step on its own stream; MlaTail::Run records the tail
// into that capture (programmatic edge included) and the runtime instantiates the graph. The
// executable graph returned is the caller's: it destroys it (cudaGraphExecDestroy).
absl::StatusOr<cudaGraphExec_t> CaptureStepWithTail(mla_tail::MlaTail& tail,
                                                    const mla_tail::TailShape& shape,
                                                    const mla_tail::TailBuffers& buffers,
                                                    cudaStream_t stream);

// (b) A TailGraphSet for a model's layers and batch buckets: set up once, then one Replay per
// layer and step (the smallest bucket that holds `rows`; padding requests get length 0).
// `lengths` must be the buffer every layer's TailBuffers::lengths points at: its padding is
// zeroed once for all layers.
absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> MakeTailGraphSet(
    int device, int heads, const std::vector<int>& buckets,
    absl::Span<const mla_tail::TailBuffers> layer_buffers);
absl::Status DecodeStepWithGraphSet(mla_tail::TailGraphSet& set, int rows, int32_t* lengths,
                                    cudaStream_t stream);

// (c) The tail as nodes of the runtime's own step graph, after each layer's attention node,
// updated in place in the instantiated graph when pointers move. The caller owns `graph` and
// `exec` and destroys both (cudaGraphExecDestroy, cudaGraphDestroy). AddTailsToStepGraph needs an
// attention node per layer (else InvalidArgument) and a graph without tails: calling it again
// with a new graph replaces the earlier call's exec and tails once the new graph is
// instantiated; on an error the step keeps them and the graph loses the tails it was given.
struct StepGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<mla_tail::TailNode> tails;  // one per layer
};
absl::Status AddTailsToStepGraph(const mla_tail::MlaTail& tail, const mla_tail::TailShape& shape,
                                 absl::Span<const cudaGraphNode_t> attention_nodes,
                                 absl::Span<const mla_tail::TailBuffers> layer_buffers,
                                 StepGraph* step);
absl::Status PointStepAt(StepGraph& step, absl::Span<const mla_tail::TailBuffers> layer_buffers);

}  // namespace mla_tail_examples

#endif  // MLA_TAIL_EXAMPLES_EMBEDDING_SNIPPETS_H_

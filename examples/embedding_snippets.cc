#include "examples/embedding_snippets.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/padding.h"

namespace mla_tail_examples {

namespace {

// A failed call's error as a status, and no longer CUDA's last error (cudaGetLastError clears
// it), so that it is reported once: by the status, not again by the runtime's next check.
absl::Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  (void)cudaGetLastError();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

}  // namespace

// [snippet: buffers]
mla_tail::TailBuffers LayerBuffers(int heads, const mla_tail::bf16* latent,
                                   const mla_tail::bf16* kv_b_proj, const mla_tail::bf16* gate,
                                   int64_t gate_width, const int32_t* lengths,
                                   mla_tail::bf16* out) {
  // clang-format off
  mla_tail::TailBuffers b;                     // strides in elements
  b.latent = latent;                           // [B, H, 512]
  b.latent_row_stride = heads * 512;
  b.w_uv = kv_b_proj + 128 * 512;              // the V half of [H, 256, 512]
  b.w_head_stride = 256 * 512;
  b.w_row_stride = 512;
  b.gate = gate;                               // [B, H * 128] of a wider row
  b.gate_row_stride = gate_width;
  b.lengths = lengths;                         // int32 [B / q]; 0 = inactive
  b.output = out;                              // [B, H * 128]
  b.output_row_stride = heads * 128;
  // clang-format on
  return b;
}
// [end snippet]

// [snippet: eager tail]
absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> MakeTail(int device) {
  return mla_tail::MlaTail::Create(device, mla_tail::TailOptions{});
}
// [end snippet]

// [snippet: eager tail under the runtime's capture]
absl::StatusOr<cudaGraphExec_t> CaptureStepWithTail(mla_tail::MlaTail& tail,
                                                    const mla_tail::TailShape& shape,
                                                    const mla_tail::TailBuffers& buffers,
                                                    cudaStream_t stream) {
  MLA_TAIL_RETURN_IF_ERROR(CudaStatus(  // this file's helper: the error as a status, cleared
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture"));
  // ... the runtime's attention kernels, writing buffers.latent ...
  const absl::Status run = tail.Run(shape, buffers, stream);
  // ... the runtime's output projection, reading buffers.output ...
  cudaGraph_t graph = nullptr;  // the capture ended whatever Run said, its error cleared:
  const absl::Status ended = CudaStatus(cudaStreamEndCapture(stream, &graph), "end capture");
  if (!run.ok() && graph != nullptr) cudaGraphDestroy(graph);
  MLA_TAIL_RETURN_IF_ERROR(run);
  MLA_TAIL_RETURN_IF_ERROR(ended);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  MLA_TAIL_RETURN_IF_ERROR(CudaStatus(instantiated, "instantiate"));
  return exec;  // the caller's: launched each step, cudaGraphExecDestroy(exec) at the end
}
// [end snippet]

// [snippet: graph set]
absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> MakeTailGraphSet(
    int device, int heads, const std::vector<int>& buckets,
    absl::Span<const mla_tail::TailBuffers> layer_buffers) {
  mla_tail::GraphSetOptions options;
  options.heads = heads;
  options.q = 1;
  options.layers = static_cast<int>(layer_buffers.size());
  options.buckets = buckets;  // e.g. {1, 16, 64}; buffers hold the largest bucket's rows
  absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
      mla_tail::TailGraphSet::Create(device, options);
  if (!set.ok()) return set.status();
  for (int layer = 0; layer < options.layers; ++layer) {
    MLA_TAIL_RETURN_IF_ERROR((*set)->SetLayer(layer, layer_buffers[layer]));
  }
  MLA_TAIL_RETURN_IF_ERROR((*set)->CaptureAll());  // ahead of time, outside any capture
  return set;
}

// Each step. Every layer's TailBuffers::lengths must point at `lengths`: one padding fill for all.
absl::Status DecodeStepWithGraphSet(mla_tail::TailGraphSet& set, int rows, int32_t* lengths,
                                    cudaStream_t stream) {
  absl::StatusOr<int> bucket_rows = set.BucketRows(rows);
  if (!bucket_rows.ok()) return bucket_rows.status();
  // The padding requests [rows, bucket) must have length 0: their output rows become +0.0.
  MLA_TAIL_RETURN_IF_ERROR(
      mla_tail::ZeroPaddingLengths(lengths, rows, *bucket_rows, set.options().q, stream));
  for (int layer = 0; layer < set.options().layers; ++layer) {
    // ... the layer's attention ...
    MLA_TAIL_RETURN_IF_ERROR(set.Replay(layer, rows, stream));
    // ... the layer's output projection ...
  }
  return absl::OkStatus();
}
// [end snippet]

// The tails a failed AddTailsToStepGraph added, removed from the step's graph with their edges
// (it then holds what it held before the call); `status` returned. cudaGraphDestroyNode removes
// one node: nodes of the runtime's own added after a tail in that loop must be removed as well,
// or they stay behind, no longer after any tail.
absl::Status RemoveTails(const std::vector<mla_tail::TailNode>& added, absl::Status status) {
  for (const mla_tail::TailNode& node : added) cudaGraphDestroyNode(node.node());
  return status;
}

// [snippet: tail nodes in the runtime's step graph]
// StepGraph (embedding_snippets.h): the runtime's graph (its attention nodes, no tails yet),
// exec, tails. On an error the step keeps the exec and tails it had.
absl::Status AddTailsToStepGraph(const mla_tail::MlaTail& tail, const mla_tail::TailShape& shape,
                                 absl::Span<const cudaGraphNode_t> attention_nodes,
                                 absl::Span<const mla_tail::TailBuffers> layer_buffers,
                                 StepGraph* step) {
  if (attention_nodes.size() < layer_buffers.size()) {
    return absl::InvalidArgumentError("attention_nodes: fewer than layer_buffers");
  }
  std::vector<mla_tail::TailNode> tails;
  for (size_t layer = 0; layer < layer_buffers.size(); ++layer) {
    // A programmatic edge from the attention kernel node: the tail fetches W_UV while the
    // attention kernel still runs, and waits for it before reading the latent.
    absl::StatusOr<mla_tail::TailNode> node = mla_tail::AddTailNode(
        tail, step->graph, {attention_nodes[layer]}, shape, layer_buffers[layer]);
    if (!node.ok()) return RemoveTails(tails, node.status());  // the graph as it was
    // ... the layer's output projection, after node->node() (on a later error, removed too) ...
    tails.push_back(*node);
  }
  // Instantiated for the device current on this thread: the tail's (one thread a device).
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t e = cudaGraphInstantiate(&exec, step->graph, 0); e != cudaSuccess) {
    return RemoveTails(tails, CudaStatus(e, "instantiate"));
  }
  if (step->exec != nullptr) cudaGraphExecDestroy(step->exec);  // an earlier graph's, replaced
  step->exec = exec;
  step->tails = std::move(tails);
  return absl::OkStatus();
}

absl::Status PointStepAt(StepGraph& step, absl::Span<const mla_tail::TailBuffers> layer_buffers) {
  if (layer_buffers.size() < step.tails.size()) {
    return absl::InvalidArgumentError("layer_buffers: fewer than the step's tails");
  }
  // A kernel-node update per layer in the instantiated graph: no re-instantiation, and launches
  // already enqueued keep the pointers they had.
  // On an error the layers before point at the new buffers already (checking every layer first
  // with MlaTail::CheckBuffers and the node's types avoids it): launch only once a call is OK.
  for (size_t layer = 0; layer < step.tails.size(); ++layer) {
    MLA_TAIL_RETURN_IF_ERROR(step.tails[layer].Update(step.exec, layer_buffers[layer]));
  }
  return absl::OkStatus();
}
// [end snippet]

}  // namespace mla_tail_examples

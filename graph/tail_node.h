#ifndef MLA_TAIL_GRAPH_TAIL_NODE_H_
#define MLA_TAIL_GRAPH_TAIL_NODE_H_

// TailNode: one layer's tail as a node of the caller's own CUDA graph, for a runtime that
// builds or captures its whole decode step as one graph and updates it in place.
//
//   // Building the step graph (once per bucket):
//   auto tail_node = mla_tail::AddTailNode(*tail, graph, {attention_node}, shape, buffers);
//   ... add the output projection after tail_node->node() ...
//   cudaGraphInstantiate(&exec, graph, 0);
//   // Each step, when a pointer moved (only future launches of `exec` see it):
//   MLA_TAIL_RETURN_IF_ERROR(tail_node->Update(exec, new_buffers));
//
// Or, for a runtime that captures its step with stream capture: RecordTailNode(*tail, stream,
// shape, buffers) records the tail into the capture under way (as MlaTail::Run would) and
// returns the same handle.
//
// PDL: with TailNodeOptions::programmatic_edge (the default, when the MlaTail launches with PDL)
// the edge from each dependency that is a kernel node is programmatic: the tail's blocks start
// once every block of that kernel has triggered its dependents (griddepcontrol.launch_dependents)
// or exited, fetch their W_UV slices, and wait (griddepcontrol.wait) for the kernel's memory
// before reading the latent, gate and lengths. Edges from other node types, and from the
// dependencies in TailNodeOptions::full_edge_dependencies (a kernel that writes W_UV), are full
// edges.
//
// The fused path only (the BMM path's GEMM plan and scratch belong to an MlaTail: record it with
// MlaTail::Run, or use TailGraphSet).
//
// The nodes hold only the caller's pointers and nothing of the MlaTail: the graph and its
// executable graphs may outlive it. A TailNode is a small value (copyable, default-constructible
// as an empty handle, so that it may live in containers: std::vector<TailNode>(layers)); it is
// used by one thread at a time, like the graph it belongs to.
//
// Pointers are checked as MlaTail::Run checks them (what each buffer points at), when a node is
// added or updated, never when the graph is launched.

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {

struct TailNodeOptions {
  // A programmatic (PDL) edge from each kernel-node dependency; requires the MlaTail to launch
  // with PDL (TailOptions::pdl), else the edges are full edges.
  bool programmatic_edge = true;
  // Dependencies (each one of AddTailNode's) that get a full edge whatever programmatic_edge
  // says: a kernel that writes W_UV or its scales, which the tail reads before its dependency
  // wait (docs/spec.md, "Programmatic dependent launch"). The span is read during the call only.
  absl::Span<const cudaGraphNode_t> full_edge_dependencies;
};

class TailNode {
 public:
  // An empty handle, holding no node: Update and UpdateGraph fail with FailedPrecondition until
  // a handle from AddTailNode or RecordTailNode is assigned to it.
  TailNode() = default;

  // Whether the handle holds a node.
  bool empty() const { return node_ == nullptr; }
  // The node that work after the tail depends on.
  cudaGraphNode_t node() const { return node_; }
  const TailShape& shape() const { return shape_; }
  // The buffers last written: as added, or as last given to Update or UpdateGraph (after
  // Update, what that exec holds; the graph itself holds them only after UpdateGraph).
  const TailBuffers& buffers() const { return buffers_; }
  // The kernel the node runs.
  FusedKernel kernel() const { return kernel_; }

  // Points the tail's node in `exec` (instantiated from the graph the node belongs to) at
  // `buffers`, validated for the node's shape: a kernel-node update (about 1 us of host time),
  // no re-instantiation. Launches of `exec` already enqueued keep what they had. On error
  // nothing changed: FailedPrecondition for an empty handle, InvalidArgument for bad buffers,
  // buffers whose W_UV or output type (bf16 or e4m3) is not the node's, or an `exec` that was not
  // instantiated from the node's graph. One of the node's last two sets of buffers that passed is
  // not validated or checked again, but for full pointer checks (docs/spec.md).
  absl::Status Update(cudaGraphExec_t exec, const TailBuffers& buffers);

  // Also rewrites the node in the graph itself, so that later instantiations and clones of it
  // hold `buffers` (Update changes only an executable graph).
  absl::Status UpdateGraph(const TailBuffers& buffers);

  // The handle of this node's copy in `clone`, a graph made from the node's graph by
  // cudaGraphClone (cudaGraphNodeFindInClone): its Update and UpdateGraph act on the clone's
  // executable graphs and on the clone. The clone's node holds what the graph held when it was
  // cloned; buffers() starts as this handle's. FailedPrecondition for an empty handle,
  // InvalidArgument when `clone` is null, not a clone of the node's graph, or holds no copy of
  // the node (added to the graph after the clone was made, or removed from the clone).
  absl::StatusOr<TailNode> InClone(cudaGraph_t clone) const;

 private:
  friend class TailNodeBuilder;

  int device_ = 0;
  bool full_pointer_checks_ = false;
  cudaGraphNode_t node_ = nullptr;
  // The node's launch for buffers without a gate ([0]) and with one ([1]), each fixed for the
  // node's shape: an update takes the one its buffers' gate picks.
  struct Launch {
    const void* function = nullptr;
    dim3 grid;
    dim3 block;
    unsigned int smem_bytes = 0;
  };
  Launch launches_[2];
  TailShape shape_;
  TailBuffers buffers_;
  FusedKernel kernel_ = FusedKernel::kAuto;
  // The last buffer sets validated and checked for this node, most recent first: an update with
  // one of them again skips ValidateTail and the cached pointer checks while the cache has
  // forgotten nothing since.
  std::array<TailBuffers, 2> checked_{};
  int checked_count_ = 0;
  uint64_t checked_stamp_ = 0;  // the pointer cache's when they were checked
};

// Adds `tail`'s fused kernel for `shape` over `buffers` to `graph`, after `dependencies` (nodes
// of `graph`; may be empty). The graph must be instantiated on `tail`'s device. Validates every
// argument first: InvalidArgument for a bad shape or buffer, or a dependency that is null, given
// twice or not a node of `graph`, a full-edge dependency (TailNodeOptions) that is not one of
// `dependencies`, and for a graph or dependencies CUDA refuses the node with. On error nothing
// was added.
absl::StatusOr<TailNode> AddTailNode(const MlaTail& tail, cudaGraph_t graph,
                                     absl::Span<const cudaGraphNode_t> dependencies,
                                     const TailShape& shape, const TailBuffers& buffers,
                                     const TailNodeOptions& options = {});

// Records `tail`'s fused kernel into the capture under way on `stream` (after what the capture
// holds so far, with a programmatic edge when the MlaTail launches with PDL, as MlaTail::Run
// records it) and returns its node. FailedPrecondition when `stream` is not capturing.
absl::StatusOr<TailNode> RecordTailNode(const MlaTail& tail, cudaStream_t stream,
                                        const TailShape& shape, const TailBuffers& buffers);

}  // namespace mla_tail

#endif  // MLA_TAIL_GRAPH_TAIL_NODE_H_

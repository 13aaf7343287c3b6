#include "mla_tail/graph/tail_node.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/pointer_checks.h"
#include "mla/internal/recent_buffers.h"
#include "mla/internal/tail_access.h"
#include "mla/internal/tail_kernel_node.h"
#include "mla/kernels/launch.h"

namespace mla_tail {

class TailNodeBuilder {
 public:
  // `stamp`: the pointer cache's, read before `buffers` were checked.
  static TailNode Make(const MlaTail& tail, const internal::TailKernelNode& node,
                       const TailBuffers& buffers, uint64_t stamp) {
    TailNode made;
    made.device_ = tail.device();
    made.full_pointer_checks_ = tail.options().full_pointer_checks;
    made.node_ = node.node;
    for (int gated = 0; gated < 2; ++gated) {
      const internal::KernelLaunch& launch = node.launches[gated];
      made.launches_[gated] = {launch.function, launch.grid, launch.block, launch.smem_bytes};
    }
    made.shape_ = node.shape;
    made.buffers_ = buffers;
    made.kernel_ = tail.FusedKernelFor(node.shape, WeightTypeOf(buffers), OutputTypeOf(buffers));
    internal::MakeRecent(Recent(made), buffers, stamp);
    return made;
  }

  static internal::RecentSets Recent(TailNode& made) {
    return {made.checked_, made.checked_count_, made.checked_stamp_};
  }

  // What `buffers` point at, checked as the node's MlaTail checks it (the device current).
  static absl::Status CheckPointers(int device, bool full_pointer_checks, const TailShape& shape,
                                    const TailBuffers& buffers) {
    return internal::CheckTailBuffers(
        device, shape, buffers,
        full_pointer_checks ? internal::PointerCheck::kEveryCall : internal::PointerCheck::kCached);
  }

  // Points the node at `buffers`: in `exec`, or in the graph itself when `exec` is null.
  static absl::Status Write(TailNode& made, cudaGraphExec_t exec, const TailBuffers& buffers) {
    internal::CudaErrorScope errors;
    // A set that passed before passes again while the pointer cache has forgotten nothing (the
    // answers depend on the shape, the buffers and the cache alone), but for full pointer
    // checks, which ask CUDA anew.
    const uint64_t stamp = internal::CheckedPointersStamp(made.device_);
    const bool checked = internal::IsRecent(Recent(made), buffers, stamp);
    if (!checked) MLA_RETURN_IF_ERROR(ValidateTail(made.shape_, buffers));
    // The node's kernel is the instantiation for its buffers' weight and output types.
    if (WeightTypeOf(buffers) != WeightTypeOf(made.buffers_) ||
        OutputTypeOf(buffers) != OutputTypeOf(made.buffers_)) {
      return absl::InvalidArgumentError(
          "the buffers' W_UV or output type (bf16 or e4m3) differs from the node's: a node runs "
          "one kernel; add a node for the other types");
    }
    internal::DeviceGuard guard;
    MLA_RETURN_IF_ERROR(guard.Enter(made.device_));
    if (!checked || made.full_pointer_checks_) {
      MLA_RETURN_IF_ERROR(
          CheckPointers(made.device_, made.full_pointer_checks_, made.shape_, buffers));
    }
    internal::TailKernelNode node;
    node.node = made.node_;
    for (int gated = 0; gated < 2; ++gated) {
      const TailNode::Launch& launch = made.launches_[gated];
      node.launches[gated] = {launch.function, launch.grid, launch.block, launch.smem_bytes};
    }
    node.shape = made.shape_;
    const absl::Status written = node.Write(exec, buffers);
    // The parameters are the node's own, validated: CUDA refuses the exec, not them.
    const std::optional<cudaError_t> error = CudaErrorOf(written);
    if (exec != nullptr &&
        (error == cudaErrorInvalidValue || error == cudaErrorInvalidResourceHandle)) {
      return internal::CallersHandleStatus(
          *error,
          "exec was not instantiated from the graph that holds this TailNode's node, or the "
          "node was added or removed since (cudaGraphExecKernelNodeSetParams)");
    }
    MLA_RETURN_IF_ERROR(written);
    made.buffers_ = buffers;
    internal::MakeRecent(Recent(made), buffers, stamp);
    return absl::OkStatus();
  }
};

absl::Status TailNode::Update(cudaGraphExec_t exec, const TailBuffers& buffers) {
  if (empty()) return absl::FailedPreconditionError("this TailNode is empty: it holds no node");
  if (exec == nullptr) return absl::InvalidArgumentError("exec is null");
  return TailNodeBuilder::Write(*this, exec, buffers);
}

absl::Status TailNode::UpdateGraph(const TailBuffers& buffers) {
  if (empty()) return absl::FailedPreconditionError("this TailNode is empty: it holds no node");
  return TailNodeBuilder::Write(*this, /*exec=*/nullptr, buffers);
}

absl::StatusOr<TailNode> TailNode::InClone(cudaGraph_t clone) const {
  internal::CudaErrorScope errors;
  if (empty()) return absl::FailedPreconditionError("this TailNode is empty: it holds no node");
  if (clone == nullptr) return absl::InvalidArgumentError("clone is null");
  cudaGraphNode_t found = nullptr;
  if (const cudaError_t e = cudaGraphNodeFindInClone(&found, node_, clone); e != cudaSuccess) {
    return e == cudaErrorInvalidValue || e == cudaErrorInvalidResourceHandle
               ? internal::CallersHandleStatus(
                     e,
                     "clone is not a clone of the graph that holds this TailNode's node "
                     "(cudaGraphNodeFindInClone)")
               : internal::CudaStatus(e, "cudaGraphNodeFindInClone");
  }
  if (found == nullptr) {
    return absl::InvalidArgumentError("clone holds no copy of this TailNode's node");
  }
  TailNode copy = *this;
  copy.node_ = found;
  return copy;
}

absl::StatusOr<TailNode> AddTailNode(const MlaTail& tail, cudaGraph_t graph,
                                     absl::Span<const cudaGraphNode_t> dependencies,
                                     const TailShape& shape, const TailBuffers& buffers,
                                     const TailNodeOptions& options) {
  internal::CudaErrorScope errors;
  if (graph == nullptr) return absl::InvalidArgumentError("graph is null");
  MLA_RETURN_IF_ERROR(ValidateTail(shape, buffers));
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(tail.device()));
  const uint64_t stamp = internal::CheckedPointersStamp(tail.device());
  MLA_RETURN_IF_ERROR(TailNodeBuilder::CheckPointers(
      tail.device(), tail.options().full_pointer_checks, shape, buffers));

  // `graph` is asked for its nodes whether or not they are needed: a handle CUDA refuses is the
  // caller's to fix. Every dependency must be one of them (CUDA's refusal would not say which).
  auto graph_nodes_status = [](cudaError_t error) {
    return error == cudaErrorInvalidValue || error == cudaErrorInvalidResourceHandle
               ? internal::CallersHandleStatus(error, "graph is not a graph CUDA knows")
               : internal::CudaStatus(error, "cudaGraphGetNodes");
  };
  size_t count = 0;
  if (const cudaError_t e = cudaGraphGetNodes(graph, nullptr, &count); e != cudaSuccess) {
    return graph_nodes_status(e);
  }
  std::vector<cudaGraphNode_t> graph_nodes;
  if (!dependencies.empty()) {
    graph_nodes.resize(count);
    if (const cudaError_t e = cudaGraphGetNodes(graph, graph_nodes.data(), &count);
        e != cudaSuccess) {
      return graph_nodes_status(e);
    }
    graph_nodes.resize(count);
    std::sort(graph_nodes.begin(), graph_nodes.end());
  }

  // A programmatic edge only from kernel nodes (CUDA defines the port on those alone), and not
  // from those the caller asks a full edge from.
  const bool programmatic = options.programmatic_edge && tail.options().pdl;
  for (size_t i = 0; i < options.full_edge_dependencies.size(); ++i) {
    if (std::find(dependencies.begin(), dependencies.end(), options.full_edge_dependencies[i]) ==
        dependencies.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "full_edge_dependencies[", i, "] is not one of the dependencies given to AddTailNode"));
    }
  }
  std::vector<cudaGraphEdgeData> edges(dependencies.size());
  for (size_t i = 0; i < dependencies.size(); ++i) {
    if (dependencies[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("dependency ", i, " is null"));
    }
    if (!std::binary_search(graph_nodes.begin(), graph_nodes.end(), dependencies[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("dependency ", i, " is not a node of `graph`"));
    }
    cudaGraphNodeType type;
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphNodeGetType(dependencies[i], &type),
                             absl::StrCat("cudaGraphNodeGetType(dependency ", i, ")"));
    edges[i] = cudaGraphEdgeData{};
    const bool full =
        std::find(options.full_edge_dependencies.begin(), options.full_edge_dependencies.end(),
                  dependencies[i]) != options.full_edge_dependencies.end();
    if (programmatic && !full && type == cudaGraphNodeTypeKernel) {
      edges[i].from_port = cudaGraphKernelNodePortProgrammatic;
      edges[i].type = cudaGraphDependencyTypeProgrammatic;
    }
  }
  // CUDA takes no dependency twice (and its refusal would read as a library fault).
  std::vector<cudaGraphNode_t> distinct(dependencies.begin(), dependencies.end());
  std::sort(distinct.begin(), distinct.end());
  if (auto twice = std::adjacent_find(distinct.begin(), distinct.end()); twice != distinct.end()) {
    const auto first = std::find(dependencies.begin(), dependencies.end(), *twice);
    const auto second = std::find(first + 1, dependencies.end(), *twice);
    return absl::InvalidArgumentError(absl::StrCat("a dependency is given twice: dependencies ",
                                                   first - dependencies.begin(), " and ",
                                                   second - dependencies.begin()));
  }

  absl::StatusOr<internal::TailKernelNode> node =
      internal::TailAccess::FusedNode(tail, shape, buffers);
  if (!node.ok()) return node.status();
  internal::TailKernelNode::Argument argument;
  const cudaKernelNodeParams kernel = node->Params(buffers, &argument);
  cudaGraphNodeParams params = {};
  params.type = cudaGraphNodeTypeKernel;
  params.kernel.func = kernel.func;
  params.kernel.gridDim = kernel.gridDim;
  params.kernel.blockDim = kernel.blockDim;
  params.kernel.sharedMemBytes = kernel.sharedMemBytes;
  params.kernel.kernelParams = kernel.kernelParams;
  // The node's own parameters are validated: what CUDA refuses as a value here is the graph or
  // its dependencies (a graph of another context, an edge CUDA does not take).
  if (const cudaError_t e = cudaGraphAddNode(
          &node->node, graph, dependencies.empty() ? nullptr : dependencies.data(),
          dependencies.empty() ? nullptr : edges.data(), dependencies.size(), &params);
      e != cudaSuccess) {
    return e == cudaErrorInvalidValue
               ? internal::CallersHandleStatus(
                     e,
                     "graph or dependencies refused by CUDA for the tail's node (cudaGraphAddNode)")
               : internal::CudaStatus(e, "cudaGraphAddNode(tail)");
  }
  return TailNodeBuilder::Make(tail, *node, buffers, stamp);
}

absl::StatusOr<TailNode> RecordTailNode(const MlaTail& tail, cudaStream_t stream,
                                        const TailShape& shape, const TailBuffers& buffers) {
  internal::CudaErrorScope errors;
  // Recorded as MlaTail::Run records it (the launch attribute makes the edge programmatic).
  // `stream` is the caller's: a capture of theirs that CUDA refuses is theirs to begin anew.
  const uint64_t stamp = internal::CheckedPointersStamp(tail.device());
  absl::StatusOr<internal::TailKernelNode> node =
      internal::TailAccess::Record(tail, shape, buffers, stream, TailPath::kFused);
  if (!node.ok()) return internal::OnCallersCapture(node.status());
  return TailNodeBuilder::Make(tail, *node, buffers, stamp);
}

}  // namespace mla_tail

#include "mla_tail/graph/tail_node.h"

#include <cuda_runtime.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/tail_access.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"

namespace mla_tail {

using mla_tail::TailBuffers;
using mla_tail::TailShape;

class TailNodeBuilder {
 public:
  // Validates what a tail node needs and plans its launch (nothing is added yet).
  static absl::StatusOr<TailNode> Plan(const mla_tail::MlaTail& tail, const TailShape& shape,
                                       const TailBuffers& buffers,
                                       internal::FusedTailParams* params) {
    MLA_RETURN_IF_ERROR(mla_tail::ValidateTail(shape, buffers));
    if (mla_tail::MlaTail::Resolve(mla_tail::TailPath::kAuto, shape) !=
        mla_tail::TailPath::kFused) {
      return absl::UnimplementedError(absl::StrCat(
          "graph nodes hold the fused path only; the rule takes the BMM path at heads = ",
          shape.heads, ", rows = ", shape.rows, ": use MlaTail::Run or TailGraphSet there"));
    }
    internal::KernelLaunch launch;
    MLA_RETURN_IF_ERROR(
        mla_tail::internal::TailAccess::PlanFused(tail, shape, buffers, &launch, params));
    TailNode nodes;
    nodes.device_ = tail.device();
    nodes.shape_ = shape;
    nodes.buffers_ = buffers;
    nodes.kernel_ = tail.FusedKernelFor(shape);
    nodes.function_ = launch.function;
    nodes.grid_ = launch.grid;
    nodes.block_ = launch.block;
    nodes.smem_bytes_ = launch.smem_bytes;
    return nodes;
  }

  static void SetNode(TailNode* nodes, cudaGraphNode_t node) { nodes->node_ = node; }

  // Points the node at `buffers`: in `exec`, or in the graph itself when `exec` is null.
  static absl::Status Write(TailNode& nodes, cudaGraphExec_t exec, const TailBuffers& buffers);

  static internal::KernelLaunch LaunchOf(const TailNode& nodes) {
    internal::KernelLaunch launch;
    launch.function = nodes.function_;
    launch.grid = nodes.grid_;
    launch.block = nodes.block_;
    launch.smem_bytes = nodes.smem_bytes_;
    return launch;
  }
};

namespace {

// The node's kernel parameters with `params` as its argument (`arguments` must outlive the use).
cudaKernelNodeParams KernelParams(const void* function, dim3 grid, dim3 block,
                                  unsigned int smem_bytes, void** arguments) {
  cudaKernelNodeParams p = {};
  p.func = const_cast<void*>(function);
  p.gridDim = grid;
  p.blockDim = block;
  p.sharedMemBytes = smem_bytes;
  p.kernelParams = arguments;
  p.extra = nullptr;
  return p;
}

}  // namespace

absl::Status TailNodeBuilder::Write(TailNode& nodes, cudaGraphExec_t exec,
                                    const TailBuffers& buffers) {
  mla_tail::internal::CudaErrorScope errors;
  if (nodes.node_ == nullptr) return absl::FailedPreconditionError("this TailNode holds no node");
  MLA_RETURN_IF_ERROR(mla_tail::ValidateTail(nodes.shape_, buffers));
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(nodes.device_));
  internal::FusedTailParams params = internal::MakeFusedTailParams(nodes.shape_, buffers);
  void* arguments[] = {&params};
  const cudaKernelNodeParams p =
      KernelParams(nodes.function_, nodes.grid_, nodes.block_, nodes.smem_bytes_, arguments);
  if (exec != nullptr) {
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphExecKernelNodeSetParams(exec, nodes.node_, &p),
                             "cudaGraphExecKernelNodeSetParams");
  } else {
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphKernelNodeSetParams(nodes.node_, &p),
                             "cudaGraphKernelNodeSetParams");
  }
  nodes.buffers_ = buffers;
  return absl::OkStatus();
}

absl::Status TailNode::Update(cudaGraphExec_t exec, const TailBuffers& buffers) {
  if (exec == nullptr) return absl::InvalidArgumentError("exec is null");
  return TailNodeBuilder::Write(*this, exec, buffers);
}

absl::Status TailNode::UpdateGraph(const TailBuffers& buffers) {
  return TailNodeBuilder::Write(*this, /*exec=*/nullptr, buffers);
}

absl::StatusOr<TailNode> AddTailNode(const mla_tail::MlaTail& tail, cudaGraph_t graph,
                                     absl::Span<const cudaGraphNode_t> dependencies,
                                     const TailShape& shape, const TailBuffers& buffers,
                                     const TailNodeOptions& options) {
  mla_tail::internal::CudaErrorScope errors;
  if (graph == nullptr) return absl::InvalidArgumentError("graph is null");
  internal::FusedTailParams params;
  absl::StatusOr<TailNode> nodes = TailNodeBuilder::Plan(tail, shape, buffers, &params);
  if (!nodes.ok()) return nodes.status();
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(tail.device()));

  // A programmatic edge only from kernel nodes (CUDA defines the port on those alone).
  const bool programmatic = options.programmatic_edge && tail.options().pdl;
  std::vector<cudaGraphEdgeData> edges(dependencies.size());
  for (size_t i = 0; i < dependencies.size(); ++i) {
    if (dependencies[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("dependency ", i, " is null"));
    }
    cudaGraphNodeType type;
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphNodeGetType(dependencies[i], &type),
                             absl::StrCat("cudaGraphNodeGetType(dependency ", i, ")"));
    edges[i] = cudaGraphEdgeData{};
    if (programmatic && type == cudaGraphNodeTypeKernel) {
      edges[i].from_port = cudaGraphKernelNodePortProgrammatic;
      edges[i].type = cudaGraphDependencyTypeProgrammatic;
    }
  }

  const internal::KernelLaunch launch = TailNodeBuilder::LaunchOf(*nodes);
  void* arguments[] = {&params};
  cudaGraphNodeParams node_params = {};
  node_params.type = cudaGraphNodeTypeKernel;
  node_params.kernel.func = const_cast<void*>(launch.function);
  node_params.kernel.gridDim = launch.grid;
  node_params.kernel.blockDim = launch.block;
  node_params.kernel.sharedMemBytes = launch.smem_bytes;
  node_params.kernel.kernelParams = arguments;
  cudaGraphNode_t node = nullptr;
  MLA_RETURN_IF_CUDA_ERROR(
      cudaGraphAddNode(&node, graph, dependencies.empty() ? nullptr : dependencies.data(),
                       dependencies.empty() ? nullptr : edges.data(), dependencies.size(),
                       &node_params),
      "cudaGraphAddNode(tail)");
  TailNodeBuilder::SetNode(&*nodes, node);
  return nodes;
}

absl::StatusOr<TailNode> RecordTailNode(const mla_tail::MlaTail& tail, cudaStream_t stream,
                                        const TailShape& shape, const TailBuffers& buffers) {
  mla_tail::internal::CudaErrorScope errors;
  internal::FusedTailParams params;
  absl::StatusOr<TailNode> nodes = TailNodeBuilder::Plan(tail, shape, buffers, &params);
  if (!nodes.ok()) return nodes.status();
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(tail.device()));
  absl::StatusOr<bool> capturing = mla_tail::internal::IsCapturing(stream);
  if (!capturing.ok()) return capturing.status();
  if (!*capturing) {
    return absl::FailedPreconditionError(
        "RecordTailNode needs a capturing stream; launch with MlaTail::Run otherwise");
  }
  // Recorded as MlaTail::Run records it (the launch attribute makes the edge programmatic);
  // the capture's dependency set is then exactly the new node.
  const internal::KernelLaunch launch = TailNodeBuilder::LaunchOf(*nodes);
  MLA_RETURN_IF_CUDA_ERROR(internal::LaunchKernel(launch, &params, stream, tail.options().pdl),
                           "fused kernel launch (captured)");
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* after = nullptr;
  size_t count = 0;
  MLA_RETURN_IF_CUDA_ERROR(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &after, nullptr, &count),
      "cudaStreamGetCaptureInfo");
  if (status != cudaStreamCaptureStatusActive || count != 1) {
    return absl::InternalError(
        absl::StrCat("the capture did not end in the tail's node (capture status ",
                     static_cast<int>(status), ", ", count, " dependencies)"));
  }
  TailNodeBuilder::SetNode(&*nodes, after[0]);
  return nodes;
}

}  // namespace mla_tail

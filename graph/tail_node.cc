#include "mla_tail/graph/tail_node.h"

#include <cuda_runtime.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/tail_access.h"
#include "mla/internal/tail_kernel_node.h"
#include "mla/kernels/launch.h"

namespace mla_tail {

class TailNodeBuilder {
 public:
  static TailNode Make(const MlaTail& tail, const internal::TailKernelNode& node,
                       const TailBuffers& buffers) {
    TailNode made;
    made.device_ = tail.device();
    made.node_ = node.node;
    made.function_ = node.launch.function;
    made.grid_ = node.launch.grid;
    made.block_ = node.launch.block;
    made.smem_bytes_ = node.launch.smem_bytes;
    made.shape_ = node.shape;
    made.buffers_ = buffers;
    made.kernel_ = tail.FusedKernelFor(node.shape);
    return made;
  }

  // Points the node at `buffers`: in `exec`, or in the graph itself when `exec` is null.
  static absl::Status Write(TailNode& made, cudaGraphExec_t exec, const TailBuffers& buffers) {
    internal::CudaErrorScope errors;
    if (made.node_ == nullptr) return absl::FailedPreconditionError("this TailNode holds no node");
    MLA_RETURN_IF_ERROR(ValidateTail(made.shape_, buffers));
    internal::DeviceGuard guard;
    MLA_RETURN_IF_ERROR(guard.Enter(made.device_));
    internal::KernelLaunch launch;
    launch.function = made.function_;
    launch.grid = made.grid_;
    launch.block = made.block_;
    launch.smem_bytes = made.smem_bytes_;
    const internal::TailKernelNode node{made.node_, launch, made.shape_};
    MLA_RETURN_IF_ERROR(node.Write(exec, buffers));
    made.buffers_ = buffers;
    return absl::OkStatus();
  }
};

absl::Status TailNode::Update(cudaGraphExec_t exec, const TailBuffers& buffers) {
  if (exec == nullptr) return absl::InvalidArgumentError("exec is null");
  return TailNodeBuilder::Write(*this, exec, buffers);
}

absl::Status TailNode::UpdateGraph(const TailBuffers& buffers) {
  return TailNodeBuilder::Write(*this, /*exec=*/nullptr, buffers);
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

  absl::StatusOr<internal::KernelLaunch> launch = internal::TailAccess::FusedLaunch(tail, shape);
  if (!launch.ok()) return launch.status();
  internal::TailKernelNode node{nullptr, *launch, shape};
  internal::TailKernelNode::Argument argument;
  const cudaKernelNodeParams kernel = node.Params(buffers, &argument);
  cudaGraphNodeParams params = {};
  params.type = cudaGraphNodeTypeKernel;
  params.kernel.func = kernel.func;
  params.kernel.gridDim = kernel.gridDim;
  params.kernel.blockDim = kernel.blockDim;
  params.kernel.sharedMemBytes = kernel.sharedMemBytes;
  params.kernel.kernelParams = kernel.kernelParams;
  MLA_RETURN_IF_CUDA_ERROR(
      cudaGraphAddNode(&node.node, graph, dependencies.empty() ? nullptr : dependencies.data(),
                       dependencies.empty() ? nullptr : edges.data(), dependencies.size(), &params),
      "cudaGraphAddNode(tail)");
  return TailNodeBuilder::Make(tail, node, buffers);
}

absl::StatusOr<TailNode> RecordTailNode(const MlaTail& tail, cudaStream_t stream,
                                        const TailShape& shape, const TailBuffers& buffers) {
  // Recorded as MlaTail::Run records it (the launch attribute makes the edge programmatic).
  absl::StatusOr<internal::TailKernelNode> node =
      internal::TailAccess::Record(tail, shape, buffers, stream, TailPath::kFused);
  if (!node.ok()) return node.status();
  return TailNodeBuilder::Make(tail, *node, buffers);
}

}  // namespace mla_tail

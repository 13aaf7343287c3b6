#include "mla/internal/tail_kernel_node.h"

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"

namespace mla_tail::internal {

cudaKernelNodeParams TailKernelNode::Params(const TailBuffers& buffers, Argument* argument) const {
  if (bmm_tables != nullptr) {
    argument->pointers = MakeBmmPointerParams(shape, buffers, bmm_values, bmm_tables);
    argument->addresses[0] = &argument->pointers;
  } else {
    argument->fused = MakeFusedTailParams(shape, buffers);
    argument->addresses[0] = &argument->fused;
  }
  const KernelLaunch& launch = launches[buffers.gate != nullptr];
  cudaKernelNodeParams p = {};
  p.func = const_cast<void*>(launch.function);
  p.gridDim = launch.grid;
  p.blockDim = launch.block;
  p.sharedMemBytes = launch.smem_bytes;
  p.kernelParams = argument->addresses;
  p.extra = nullptr;
  return p;
}

absl::Status TailKernelNode::Write(cudaGraphExec_t exec, const TailBuffers& buffers) const {
  Argument argument;
  const cudaKernelNodeParams p = Params(buffers, &argument);
  if (exec == nullptr) {
    return CudaStatus(cudaGraphKernelNodeSetParams(node, &p), "cudaGraphKernelNodeSetParams");
  }
  return CudaStatus(cudaGraphExecKernelNodeSetParams(exec, node, &p),
                    "cudaGraphExecKernelNodeSetParams");
}

absl::StatusOr<cudaGraphNode_t> LastCapturedNode(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* dependencies = nullptr;
  size_t count = 0;
  MLA_RETURN_IF_CUDA_ERROR(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &dependencies, nullptr, &count),
      "cudaStreamGetCaptureInfo");
  if (status == cudaStreamCaptureStatusInvalidated) {
    // Invalidated since the launch (by other work on the capture): a capture error, which the
    // callers map to FailedPrecondition (the caller's capture) or Aborted (the library's own).
    return CudaStatus(cudaErrorStreamCaptureInvalidated, "the capture of the tail's launch");
  }
  if (status != cudaStreamCaptureStatusActive || count != 1) {
    return absl::InternalError(
        absl::StrCat("the capture did not end in the launch's node (capture status ",
                     static_cast<int>(status), ", ", count, " dependencies)"));
  }
  return dependencies[0];
}

}  // namespace mla_tail::internal

#include "mla/internal/tail_kernel_node.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/fault_hooks.h"

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

absl::StatusOr<cudaGraphNode_t> LastCapturedNode(cudaStream_t stream, const KernelLaunch& launch,
                                                 const void* argument, size_t argument_bytes) {
  const FaultHooks& faults = ActiveFaultHooks();
  if (faults.before_node_read_back) faults.before_node_read_back(stream);
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
  // Anything but the launch's kernel node (its function, configuration and argument) as the
  // capture's one dependency means that other work
  // entered the capture since the launch (another thread's launch, event wait or dependency
  // update) or ended it.
  bool ours = status == cudaStreamCaptureStatusActive && count == 1;
  cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
  if (ours) {
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphNodeGetType(dependencies[0], &type), "cudaGraphNodeGetType");
    ours = type == cudaGraphNodeTypeKernel;
  }
  if (ours) {
    cudaKernelNodeParams captured = {};
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphKernelNodeGetParams(dependencies[0], &captured),
                             "cudaGraphKernelNodeGetParams");
    const auto same = [](dim3 a, dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; };
    ours = captured.func == launch.function && same(captured.gridDim, launch.grid) &&
           same(captured.blockDim, launch.block) && captured.sharedMemBytes == launch.smem_bytes &&
           captured.kernelParams != nullptr && captured.kernelParams[0] != nullptr &&
           std::memcmp(captured.kernelParams[0], argument, argument_bytes) == 0;
  }
  if (!ours) {
    return absl::FailedPreconditionError(absl::StrCat(
        "other work was captured on the stream, or its capture ended, between the tail's launch "
        "and the read-back of its node (capture status ",
        static_cast<int>(status), ", ", count,
        " dependencies); a capturing stream takes no other thread's work while the tail is "
        "recorded into it. "
        "The capture holds the tail's node, with no handle to it: end the capture and capture "
        "anew"));
  }
  return dependencies[0];
}

}  // namespace mla_tail::internal

#ifndef MLA_TAIL_MLA_INTERNAL_TAIL_KERNEL_NODE_H_
#define MLA_TAIL_MLA_INTERNAL_TAIL_KERNEL_NODE_H_

// TailKernelNode: the one kernel node of a tail in a CUDA graph that holds the caller's
// pointers, and the one code that writes it. On the fused path it is the fused kernel's node; on
// the BMM path BmmPointersKernel's, whose output (the operand tables) the cuBLASLt GEMM and the
// gate kernel read, so that their nodes never change. MlaTail hands it out as it records a tail
// into a capture (TailAccess::Record); AddTailNode makes one for the node it adds. TailNode
// (graph/tail_node.h) and TailGraphSet's graphs write through it when the caller's pointers
// move. Not part of the public API.

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

struct TailKernelNode {
  cudaGraphNode_t node = nullptr;
  // The node's kernel and configuration, for buffers without a gate ([0]) and with one ([1]):
  // fixed for its shape (on the fused path the two differ in their function alone; the BMM
  // path's gate kernel has a node of its own, and its pointer node the same launch for both).
  KernelLaunch launches[2];
  TailShape shape;
  // BmmPointersKernel's node: the BMM scratch its parameters point into (null on the fused path).
  bf16* bmm_values = nullptr;
  void* bmm_tables = nullptr;

  // The kernel's one argument (FusedTailParams, or BmmPointerParams on the BMM path) and the
  // array of its address, which a node's parameters point to.
  struct Argument {
    union {
      FusedTailParams fused;
      BmmPointerParams pointers;
    };
    void* addresses[1];
  };

  // The node's parameters over `buffers` (validated for `shape` by the caller). They point into
  // `argument`, which must stay in place until they are used.
  cudaKernelNodeParams Params(const TailBuffers& buffers, Argument* argument) const;

  // Points the node at `buffers` (validated for `shape` by the caller): in `exec`, an executable
  // graph instantiated from the node's graph, or in the graph itself when `exec` is null. On the
  // node's device.
  absl::Status Write(cudaGraphExec_t exec, const TailBuffers& buffers) const;
};

// The node that `launch`, the last launch on `stream`, with its one argument at `argument`,
// added to the capture under way there: the capture's one dependency, checked to be a kernel node
// of that launch (function, configuration, argument bytes). Other work captured on the stream
// since the launch (another thread's) is FailedPrecondition: the capture holds the launch's
// node, but which node it is can no longer be known.
absl::StatusOr<cudaGraphNode_t> LastCapturedNode(cudaStream_t stream, const KernelLaunch& launch,
                                                 const void* argument, size_t argument_bytes);

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_TAIL_KERNEL_NODE_H_

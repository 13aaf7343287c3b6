#ifndef MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_
#define MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_

// What graph/ needs of an MlaTail beyond its public API: recording its tail into a capture with
// the node that holds the caller's pointers, the fused kernel's node for a graph of the caller's,
// how it checks pointers, and ordering the BMM scratch's release after graph replays. Not part
// of the public API.

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla/internal/pointer_checks.h"
#include "mla/internal/tail_kernel_node.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

class TailAccess {
 public:
  // Validates as MlaTail::Run does, then records the tail's launches on `path` into the capture
  // under way on `stream`, as Run records them, and returns the kernel node that holds the
  // caller's pointers, read from the capture right after its launch. FailedPrecondition when
  // `stream` is not capturing (and on the BMM path without a PrepareBmm for the shape). CUDA's
  // capture errors stay Aborted (errors.h): on a caller's stream, OnCallersCapture maps them.
  static absl::StatusOr<TailKernelNode> Record(const MlaTail& tail, const TailShape& shape,
                                               const TailBuffers& buffers, cudaStream_t stream,
                                               TailPath path);

  // The fused kernel's node for `shape` over `buffers` (validated by the caller), not yet in a
  // graph: what Run() launches on the fused path, with and without a gate.
  static absl::StatusOr<TailKernelNode> FusedNode(const MlaTail& tail, const TailShape& shape,
                                                  const TailBuffers& buffers);

  // How the tail checks pointers (TailOptions::full_pointer_checks).
  static PointerCheck PointerCheckOf(const MlaTail& tail);

  // Marks the tail's BMM scratch as in use by work just enqueued on `stream` (a replay of a
  // graph captured from the tail): the destructor's frees wait for it.
  static absl::Status RecordBmmUse(MlaTail& tail, cudaStream_t stream);
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_

#ifndef MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_
#define MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_

// What graph/ needs of an MlaTail beyond its public API: recording its tail into a capture with
// the node that holds the caller's pointers, the fused kernel's launch for a node of its own,
// and ordering the BMM scratch's release after graph replays. Not part of the public API.

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla/internal/tail_kernel_node.h"
#include "mla/kernels/launch.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

class TailAccess {
 public:
  // Validates as MlaTail::Run does, then records the tail's launches on `path` into the capture
  // under way on `stream`, as Run records them, and returns the kernel node that holds the
  // caller's pointers, read from the capture right after its launch. FailedPrecondition when
  // `stream` is not capturing (and on the BMM path without a PrepareBmm for the shape).
  static absl::StatusOr<TailKernelNode> Record(const MlaTail& tail, const TailShape& shape,
                                               const TailBuffers& buffers, cudaStream_t stream,
                                               TailPath path);

  // The fused kernel's launch for `shape` on the tail's device (the shape validated by the
  // caller): what Run() launches on the fused path.
  static absl::StatusOr<KernelLaunch> FusedLaunch(const MlaTail& tail, const TailShape& shape);

  // Marks the tail's BMM scratch as in use by work just enqueued on `stream` (a replay of a
  // graph captured from the tail): the destructor's frees wait for it.
  static absl::Status RecordBmmUse(MlaTail& tail, cudaStream_t stream);
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_

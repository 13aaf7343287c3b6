#ifndef MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_
#define MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_

// What graph/ needs of an MlaTail beyond its public API: the fused path's kernel launch for a
// shape (the node a graph holds), and ordering the BMM scratch's release after graph replays. Not
// part of the public API.

#include "absl/status/status.h"
#include "mla/kernels/launch.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

class TailAccess {
 public:
  // The fused kernel's launch and arguments for `shape` over `buffers` on the tail's device
  // (arguments validated by the caller): what Run() launches on the fused path.
  static absl::Status PlanFused(const MlaTail& tail, const TailShape& shape,
                                const TailBuffers& buffers, KernelLaunch* launch,
                                FusedTailParams* params);

  // Marks the tail's BMM scratch as in use by work just enqueued on `stream` (a replay of a
  // graph captured from the tail): the destructor's frees wait for it.
  static absl::Status RecordBmmUse(MlaTail& tail, cudaStream_t stream);
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_TAIL_ACCESS_H_

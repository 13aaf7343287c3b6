#ifndef MLA_TAIL_MLA_PADDING_H_
#define MLA_TAIL_MLA_PADDING_H_

// Padded batches without a live row count: a runtime that runs the tail for more rows than it has
// tokens (a graph set's bucket, a graph or node built for a fixed row count) gives the padding
// requests length 0, and the tail writes their output rows as +0.0 whatever their inputs hold
// (docs/spec.md). With TailBuffers::row_count the padding rows are skipped instead.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace mla_tail {

// Writes length 0 for the padding requests [rows / q, bucket_rows / q) of `lengths`, in stream
// order, so that the tail of bucket_rows rows (a graph set's replay of that bucket, a node or an
// eager run recorded for it) writes +0.0 to the padding rows. Runs on the device whose memory
// `lengths` is (the current device for host-mapped or managed memory), whatever the thread has
// current; `stream` must belong to it. InvalidArgument for q outside [1, 64],
// rows < 0, bucket_rows > 65536, either not a multiple of q, rows > bucket_rows, or padding
// requests [rows / q, bucket_rows / q) that are not reachable memory (MlaTail::Run's checks).
// With rows == bucket_rows there is nothing to write: OK once the arguments are checked (not
// the memory or the stream).
absl::Status ZeroPaddingLengths(int32_t* lengths, int rows, int bucket_rows, int q,
                                cudaStream_t stream);

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_PADDING_H_

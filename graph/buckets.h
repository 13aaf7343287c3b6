#ifndef MLA_TAIL_GRAPH_BUCKETS_H_
#define MLA_TAIL_GRAPH_BUCKETS_H_

// Batch buckets: the row counts tails are captured for. A replay of `rows` runs the smallest
// bucket >= rows; rows between are padding.

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace mla_tail {

// The default list, close to vLLM's and SGLang's: 1, 2, 4, 8..256 by 8, 272..512 by 16, each
// rounded up to a multiple of q and deduplicated (tokens = requests * q), then 544.. by 32, up to
// `max_rows` (at most kMaxRows); empty for q outside [1, kMaxQ].
std::vector<int> DefaultBuckets(int q, int max_rows = 512);

// InvalidArgument unless `buckets` is non-empty, strictly increasing, every entry a multiple of
// q and within [1, mla_tail::kMaxRows].
absl::Status ValidateBuckets(absl::Span<const int> buckets, int q);

// Index of the smallest bucket >= rows (binary search); OutOfRange past the largest.
absl::StatusOr<int> FindBucket(absl::Span<const int> buckets, int rows);

}  // namespace mla_tail

#endif  // MLA_TAIL_GRAPH_BUCKETS_H_

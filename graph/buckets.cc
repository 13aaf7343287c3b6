#include "mla_tail/graph/buckets.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {

std::vector<int> DefaultBuckets(int q, int max_rows) {
  if (q < 1 || q > kMaxQ) return {};  // ValidateBuckets names the bad q
  max_rows = std::min(max_rows, kMaxRows);
  std::vector<int> rows = {1, 2, 4};
  for (int r = 8; r <= 256; r += 8) rows.push_back(r);
  for (int r = 272; r <= 512; r += 16) rows.push_back(r);
  for (int r = 544; r <= max_rows; r += 32) rows.push_back(r);
  std::vector<int> buckets;
  for (int r : rows) {
    const int rounded = (r + q - 1) / q * q;
    if (rounded > max_rows) break;
    if (buckets.empty() || buckets.back() != rounded) buckets.push_back(rounded);
  }
  if (buckets.empty() && q <= max_rows) buckets.push_back(q);
  return buckets;
}

absl::Status ValidateBuckets(absl::Span<const int> buckets, int q) {
  if (q < 1 || q > mla_tail::kMaxQ) {
    return absl::InvalidArgumentError(
        absl::StrCat("q = ", q, " is outside [1, ", mla_tail::kMaxQ, "]"));
  }
  if (buckets.empty()) return absl::InvalidArgumentError("the bucket list is empty");
  for (size_t i = 0; i < buckets.size(); ++i) {
    const int b = buckets[i];
    if (b < 1 || b > mla_tail::kMaxRows) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket ", i, " = ", b, " is outside [1, ", mla_tail::kMaxRows, "]"));
    }
    if (b % q != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket ", i, " = ", b, " is not a multiple of q = ", q));
    }
    if (i > 0 && b <= buckets[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat("buckets must be strictly increasing: bucket ",
                                                     i, " = ", b, " follows ", buckets[i - 1]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> FindBucket(absl::Span<const int> buckets, int rows) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), rows);
  if (it == buckets.end()) {
    return absl::OutOfRangeError(absl::StrCat("rows = ", rows, " is beyond the largest bucket (",
                                              buckets.empty() ? 0 : buckets.back(), ")"));
  }
  return static_cast<int>(it - buckets.begin());
}

}  // namespace mla_tail

#ifndef MLA_TAIL_DEMO_CHECK_H_
#define MLA_TAIL_DEMO_CHECK_H_

// The decode demo's check of a layer's output after a step, against the CPU reference.

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "demo/config.h"
#include "demo/data.h"

namespace mla_tail_demo {

// Rows past the bucket downloaded to see them still poisoned.
inline constexpr int kRowsPastBucket = 8;

// Mismatches of one check, the first few described.
struct CheckLog {
  std::mutex mutex;
  int mismatches = 0;
  std::vector<std::string> first;
  void Report(std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (++mismatches <= 6) first.push_back(std::move(what));
  }
};

// Downloads a layer's output after a step into `got` (Bmax rows of room) and checks it: every
// row < rows written (+0.0 where the request has finished), the padding rows +0.0, the first
// kRowsPastBucket rows past the bucket still poisoned (0xffff), and the sampled rows, every
// column, against the CPU reference. Only the rows checked travel (a full Bmax download would
// mostly carry poison): the rows right after the bucket are where a replay of too large a
// bucket, or a tile running over, writes first. Returns how many rows were compared with the
// reference.
absl::StatusOr<int> CheckLayer(const Config& c, const Model& m, const Batch& batch, int bucket,
                               int step, int layer, std::vector<uint16_t>* got, CheckLog* log);

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_CHECK_H_

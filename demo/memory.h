#ifndef MLA_TAIL_DEMO_MEMORY_H_
#define MLA_TAIL_DEMO_MEMORY_H_

// Device and host memory as the decode demo watches it for growth after its warm-up steps.

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"

namespace mla_tail_demo {

struct MemorySample {
  int64_t device_bytes = 0;  // in use on the device: total - free (cudaMemGetInfo)
  int64_t rss_bytes = 0;     // this process's resident set
};

absl::StatusOr<MemorySample> SampleMemory();

// Memory after the warm-up steps, at the latest sample, and the most seen since warm-up.
struct MemoryWatch {
  MemorySample warm, last, max;
  explicit MemoryWatch(const MemorySample& s) : warm(s), last(s), max(s) {}
  void Add(const MemorySample& s) {
    last = s;
    max.device_bytes = std::max(max.device_bytes, s.device_bytes);
    max.rss_bytes = std::max(max.rss_bytes, s.rss_bytes);
  }
};

inline double MiB(int64_t bytes) { return bytes / 1048576.0; }

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_MEMORY_H_

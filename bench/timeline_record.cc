#include "bench/timeline_record.h"

#include <vector>

namespace mla_tail_bench {
namespace {

using Setter = cudaError_t (*)(TimelineRecord*);

std::vector<Setter>& Setters() {
  static auto* setters = new std::vector<Setter>();
  return *setters;
}

}  // namespace

bool RegisterTimelineRecordSetter(Setter set) {
  Setters().push_back(set);
  return true;
}

cudaError_t SetTimelineRecord(TimelineRecord* record) {
  for (Setter set : Setters()) {
    const cudaError_t e = set(record);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace mla_tail_bench

#ifndef MLA_TAIL_BENCH_TIMELINE_RECORD_H_
#define MLA_TAIL_BENCH_TIMELINE_RECORD_H_

// Where the stamped kernels (//bench:stamped_kernels, bench/timeline_stamps.cuh) record their
// blocks' timelines, and how the probe points them at it.

#include <cuda_runtime_api.h>

namespace mla_tail_bench {

inline constexpr int kTimelinePoints = 13;       // the stamp points (bench/timeline_probe.cc)
inline constexpr int kTimelineMaxBlocks = 1024;  // blocks of one launch that record
inline constexpr int kTimelineSlots = 16;        // launch i of a block index records in slot i % 16

// In device memory.
struct TimelineRecord {
  int launches[kTimelineMaxBlocks];  // how many times each block index has started
  unsigned sink;                     // written never: makes a stamp wait for its value
  long long clock[kTimelineSlots][kTimelineMaxBlocks][kTimelinePoints];
  long long time[kTimelineSlots][kTimelineMaxBlocks][3];  // global timer at points 0, 1 and 12
};

// Each stamped kernel file keeps its own pointer to the record (device globals are per
// translation unit without relocatable device code) and registers its setter here at static
// initialization. Returns true.
bool RegisterTimelineRecordSetter(cudaError_t (*set)(TimelineRecord* record));

// Points every stamped kernel file at `record` (device memory).
cudaError_t SetTimelineRecord(TimelineRecord* record);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_TIMELINE_RECORD_H_

#ifndef MLA_TAIL_BENCH_TIMELINE_STAMPS_CUH_
#define MLA_TAIL_BENCH_TIMELINE_STAMPS_CUH_

// The timeline stamps of //bench:stamped_kernels. Included (nvcc -include) ahead of each kernel
// source of that build, it defines the stamp points of mla/kernels/timeline_stamps.cuh: thread 0
// of each block records its clock at each point and the global timer at entry, at the dependency
// wait's return and at the last point, in the TimelineRecord that SetTimelineRecord names.

#include <cuda_runtime.h>

#include "bench/timeline_record.h"

namespace mla_tail_bench {
namespace {

// This file's pointer to the record (bench/timeline_record.h).
__constant__ TimelineRecord* g_timeline_record;

cudaError_t SetTimelineRecordOfThisFile(TimelineRecord* record) {
  return cudaMemcpyToSymbol(g_timeline_record, &record, sizeof(record));
}

[[maybe_unused]] const bool kTimelineRecordSetterRegistered =
    RegisterTimelineRecordSetter(&SetTimelineRecordOfThisFile);

__device__ __forceinline__ void TimelineStamp(int point) {
  __shared__ int slot;
  TimelineRecord* const record = g_timeline_record;
  if (threadIdx.x != 0 || record == nullptr) return;
  const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  if (block >= kTimelineMaxBlocks) return;
  if (point == 0) slot = atomicAdd(&record->launches[block], 1) % kTimelineSlots;
  record->clock[slot][block][point] = clock64();
  const int timed = point == 0 ? 0 : point == 1 ? 1 : point == kTimelinePoints - 1 ? 2 : -1;
  if (timed >= 0) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    record->time[slot][block][timed] = t;
  }
}

// A stamp taken once `value` is available: the branch on it holds the clock read back.
__device__ __forceinline__ void TimelineStampAfter(int point, unsigned value) {
  if (threadIdx.x == 0 && value == 0x7fc00001u) g_timeline_record->sink = value;
  TimelineStamp(point);
}

}  // namespace
}  // namespace mla_tail_bench

#define MLA_TIMELINE_STAMP(point) ::mla_tail_bench::TimelineStamp(point)
#define MLA_TIMELINE_STAMP_AFTER(point, value) ::mla_tail_bench::TimelineStampAfter(point, value)
// ColumnSplit's 8-row kernel, held to 144 registers a thread, takes 168 with the stamps (three
// blocks a multiprocessor still fit).
#define MLA_TIMELINE_STAMP_REGISTERS 24

#endif  // MLA_TAIL_BENCH_TIMELINE_STAMPS_CUH_

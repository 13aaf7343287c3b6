#ifndef MLA_TAIL_BENCH_TIMELINE_PROBE_H_
#define MLA_TAIL_BENCH_TIMELINE_PROBE_H_

namespace mla_tail_bench {

// What the probe runs.
struct TimelineProbeOptions {
  // e4m3 W_UV (the e4m3 rule's kernel) instead of bf16.
  bool e4m3_weights = false;
  // 32-128 heads x 1-16 rows, where W_UV's bytes are most of the tail's, instead of the
  // tensor-parallel shapes (8-16 heads x 1-1024 rows).
  bool many_heads = false;
};

// The timeline of the fused kernels' blocks (bench/timeline_probe.cc): at 8, 12 and 16 heads
// and 1-1024 rows (or the options' shapes), the kernel the rule dispatches (ColumnSplit,
// LatentSplit or Tile; shapes given to the persistent kernel are left out), every layer's tail back
// to back in one CUDA graph with PDL and L2 cold, as tail_bench embeds them. Prints CSV of the
// median replay time a layer and, stamped, the median time of each phase of the middle layers'
// blocks. Returns 0 on success; exits with a message on a CUDA error.
int RunTimelineProbe(const TimelineProbeOptions& options);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_TIMELINE_PROBE_H_

#ifndef BENCH_TIMELINE_PROBE_H_
#define BENCH_TIMELINE_PROBE_H_

namespace mla_bench {

// The timeline of MlaValueWgmma's blocks (bench/timeline_probe.cu): for each configuration and
// shape, 16 layers' tails back to back in one CUDA graph with PDL, as tail_bench embeds them;
// prints CSV of the median replay time a layer, and, stamped, each point of the middle layers'
// blocks. Returns 0 on success; exits with a message on a CUDA error.
int RunTimelineProbe();

}  // namespace mla_bench

#endif  // BENCH_TIMELINE_PROBE_H_

#ifndef MLA_TAIL_BENCH_INGEST_PROBE_H_
#define MLA_TAIL_BENCH_INGEST_PROBE_H_

namespace mla_tail_bench {

// Runs the sweep of bench/ingest_probe.cu on device 0 and prints CSV; 0 on success.
int RunIngestProbe();

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_INGEST_PROBE_H_

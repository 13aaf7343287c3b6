#ifndef BENCH_INGEST_PROBE_H_
#define BENCH_INGEST_PROBE_H_

namespace mla_bench {

// Runs the sweep of bench/ingest_probe.cu on device 0 and prints CSV; 0 on success.
int RunIngestProbe();

}  // namespace mla_bench

#endif  // BENCH_INGEST_PROBE_H_

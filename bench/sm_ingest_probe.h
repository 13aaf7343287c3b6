#ifndef MLA_TAIL_BENCH_SM_INGEST_PROBE_H_
#define MLA_TAIL_BENCH_SM_INGEST_PROBE_H_

namespace mla_tail_bench {

// The rate at which a multiprocessor takes bytes into its shared memory with all of them in
// flight, from L2 and from DRAM, with 1-132 multiprocessors at once (bench/sm_ingest_probe.cu).
// Prints CSV; returns 0, or exits with a message on a CUDA error.
int RunSmIngestProbe();

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_SM_INGEST_PROBE_H_

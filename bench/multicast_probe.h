#ifndef MLA_TAIL_BENCH_MULTICAST_PROBE_H_
#define MLA_TAIL_BENCH_MULTICAST_PROBE_H_

namespace mla_tail_bench {

// Whether sharing W_UV's reads across a cluster (bulk-copy multicast) shortens the ingest of
// 64-row x 128-column tiles (bench/multicast_probe.cu); prints CSV. Returns 0 on success; exits
// with a message on a CUDA error.
int RunMulticastProbe();

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_MULTICAST_PROBE_H_

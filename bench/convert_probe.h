#ifndef MLA_TAIL_BENCH_CONVERT_PROBE_H_
#define MLA_TAIL_BENCH_CONVERT_PROBE_H_

namespace mla_tail_bench {

// Values a multiprocessor converts a clock: the instructions e4m3 -> bf16 dequantization is built
// from, and the library's form of it beside an integer one (bench/convert_probe.cu). Prints CSV;
// returns 0, or exits with a message on a CUDA error.
int RunConvertProbe();

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_CONVERT_PROBE_H_

#ifndef MLA_TAIL_BENCH_PDL_PROBE_H_
#define MLA_TAIL_BENCH_PDL_PROBE_H_

#include <vector>

namespace mla_tail_bench {

struct PdlProbeOptions {
  int pairs = 200;  // upstream/dependent pairs per configuration
  int upstream_blocks = 132;
  int busy_ns = 4000;                               // upstream work before launch_dependents
  std::vector<int> epilogues_ns = {0, 1000, 3000};  // upstream work after it
  std::vector<int> dependent_blocks = {48, 132};
  std::vector<int> prefetch_words = {0, 16};  // 16-byte loads a thread before the wait
  // Dynamic shared memory of each kernel's blocks: an SM runs blocks of kernels with different
  // shared-memory configurations together only if its carveout suits both.
  std::vector<int> upstream_smem_bytes = {0};
  std::vector<int> dependent_smem_bytes = {0};
};

// Prints one CSV row per configuration to stdout; returns 0, or 1 on a CUDA error or a
// dependent that read the upstream's flag unset after its wait.
int RunPdlProbe(const PdlProbeOptions& options);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_PDL_PROBE_H_

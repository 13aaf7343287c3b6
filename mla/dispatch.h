#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which path a tail of `heads` heads and `batch` rows takes: the cuBLASLt batched GEMM + MlaGate
// (true) or the fused MlaValue kernel (false).
//
// Measured on an H200 (bench/results/tail_bench-*.csv, README "Dispatch"): the crossover
// follows the work, heads x rows, not heads and rows apart. At every head count measured
// (8..128) the fused kernel was faster up to heads x rows = 2048 and the BMM path from the next
// measured point, 3072 or 4096. One pair of thresholds (heads >= X and rows >= Y) cannot follow
// that line: H = 8 crosses between 256 and 512 rows, H = 128 between 16 and 32.

namespace mla {

inline constexpr int kValueBmmMinWork = 3072;  // heads x rows from which the BMM path runs

constexpr bool value_bmm(int heads, int batch) {
  return static_cast<long long>(heads) * batch >= kValueBmmMinWork;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

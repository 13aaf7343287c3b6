#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which path a tail of `heads` heads and `batch` rows takes: the cuBLASLt batched GEMM + MlaGate
// (true) or the fused MlaValue kernel (false). The thresholds are measured on an H200: see
// bench/results/ and the README's dispatch section.

namespace mla {

inline constexpr int kValueBmmHeads = 32;   // VALUE_BMM_HEADS
inline constexpr int kValueBmmFrom = 256;   // VALUE_BMM_FROM

constexpr bool value_bmm(int heads, int batch) {
  return heads >= kValueBmmHeads && batch >= kValueBmmFrom;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

#ifndef MLA_TAIL_MLA_KERNELS_PREFETCH_CUH_
#define MLA_TAIL_MLA_KERNELS_PREFETCH_CUH_

// L2 prefetch of a fused block's upstream-written inputs, issued before griddepcontrol.wait.
// A prefetch returns no data to the kernel: it only starts bringing lines into L2, where every
// SM's writes land, so the reads after the wait still see the upstream kernels' final values
// (lines an upstream kernel writes later are simply updated in L2). What it buys: with PDL the
// block launches while its upstream still runs, and the latent, gate and lengths it reads after
// the wait are L2 hits instead of DRAM round trips.
//
// Only for tails of heads x rows <= max_work: measured on the H200, the prefetch made the kernels
// 2-30% faster at small W, and the multi-wave grids of large W 5-17% slower (their later blocks
// start long after the wait is satisfied, and the prefetched lines compete with W_UV's stream
// for L2 and DRAM). The limit is kMaxPrefetchWork (latent up to 8 MB).

#include <cuda_runtime.h>

#include "mla/kernels/params.h"

namespace mla_tail::internal::device {

inline constexpr long long kMaxPrefetchWork = 8192;

__device__ __forceinline__ void PrefetchL2(const void* pointer) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(pointer));
}

// Rows [t0, t0 + rows) (clipped to p.rows) of head `head`: latent elements [k0, k0 + k) and
// gate columns [c0, c0 + columns) of each row (none without a gate: kGated false, or with
// kGateMayBeNull where p.gate is null), the rows' lengths, and the live row count when there is
// one. All threads of the block take part.
template <bool kGated = true, bool kGateMayBeNull = false>
__device__ __forceinline__ void PrefetchBlockInputsL2(const FusedTailParams& p, int head, int t0,
                                                      int rows, int k0, int k, int c0, int columns,
                                                      long long max_work = kMaxPrefetchWork) {
  if (static_cast<long long>(p.heads) * p.rows > max_work) return;
  if (threadIdx.x == 0 && p.row_count != nullptr) PrefetchL2(p.row_count);
  constexpr int kLine = 128;
  const int n = min(rows, p.rows - t0);
  const int latent_lines = (k * int(sizeof(bf16)) + kLine - 1) / kLine;
  const bool gate = kGated && (!kGateMayBeNull || p.gate != nullptr);
  const int gate_lines = gate ? (columns * int(sizeof(bf16)) + kLine - 1) / kLine : 0;
  const int per_row = latent_lines + gate_lines;
  for (int i = threadIdx.x; i < n * per_row; i += blockDim.x) {
    const int t = t0 + i / per_row;
    const int line = i % per_row;
    const char* address = line < latent_lines
                              ? reinterpret_cast<const char*>(p.latent + t * p.latent_row_stride +
                                                              head * kLatentDim + k0) +
                                    kLine * line
                              : reinterpret_cast<const char*>(p.gate + t * p.gate_row_stride +
                                                              head * kValueDim + c0) +
                                    kLine * (line - latent_lines);
    PrefetchL2(address);
  }
  if (threadIdx.x == 0 && n > 0) {
    const char* first = reinterpret_cast<const char*>(p.lengths + t0 / p.q);
    const char* last = reinterpret_cast<const char*>(p.lengths + (t0 + n - 1) / p.q);
    for (const char* a = first; a <= last; a += kLine) PrefetchL2(a);
  }
}

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_PREFETCH_CUH_

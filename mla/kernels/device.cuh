#ifndef MLA_TAIL_MLA_KERNELS_DEVICE_CUH_
#define MLA_TAIL_MLA_KERNELS_DEVICE_CUH_

// Small device helpers shared by the kernels: PDL, cp.async, tensor-core MMA, the gate math.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mla_tail::internal::device {

// Blocks until every upstream grid has completed and its writes are visible. The "memory"
// clobber keeps the compiler from hoisting loads of upstream-written data above it.
__device__ __forceinline__ void GridDependencyWait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Lets the next kernel in the stream start (its prologue overlaps our tail).
__device__ __forceinline__ void LaunchDependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The rows a launch for `rows` rows serves: all of them, or the live row count the caller keeps
// on the device (`count` non-null), clamped to [0, rows]. Read after griddepcontrol.wait, like
// the lengths: an upstream kernel may write it.
__device__ __forceinline__ int LiveRows(const int32_t* count, int rows) {
  return count == nullptr ? rows : max(0, min(*count, rows));
}

// A count the caller wrote before the upstream kernel began (`early`: TailBuffers::
// row_count_before_upstream) is read before griddepcontrol.wait, its latency hidden by the wait,
// and ReadRowsAfterWait then uses it; -1 means not read yet. Any other count is read after the
// wait. LiveRowsBeforeWait leaves the load's place to the compiler; LiveRowsPinned keeps it where
// it stands (an asm volatile load), which at a kernel's start puts it ahead of the W_UV loads:
// behind them it returns only after their DRAM round trip, which the latent's reads after the
// wait need not await. ColumnSplit, the Tile kernels and Persistent128x128 pin it at their
// start; LatentSplit, where that cost 0.05 us at 1 row even without a count, leaves it to the
// compiler after its W_UV loads (docs/design.md).
__device__ __forceinline__ int LiveRowsBeforeWait(const int32_t* count, bool early, int rows) {
  return early ? LiveRows(count, rows) : -1;
}
__device__ __forceinline__ int LiveRowsPinned(const int32_t* count, bool early, int rows) {
  if (!early) return -1;
  int n;
  asm volatile("ld.global.s32 %0, [%1];" : "=r"(n) : "l"(count));
  return max(0, min(n, rows));
}

// The pinned early count as loaded, clamped only after the wait. LiveRowsPinned clamps it before
// the wait, so a warp waits there for the load, with the L2 prefetches and the wait behind it;
// that shows where the count alone stands between the wait and the latent's copies (the Tile
// kernels without a gate). Elsewhere the clamped form measured faster (docs/design.md, with the
// numbers).
struct EarlyCount {
  int value;  // as loaded
  bool read;
};
__device__ __forceinline__ EarlyCount EarlyCountPinned(const int32_t* count, bool early) {
  int n = 0;
  if (early) asm volatile("ld.global.s32 %0, [%1];" : "=r"(n) : "l"(count));
  return {n, early};
}

// After the wait, the rows a block's loads may touch: the early count, once read; else all `rows`
// where rows past the count are readable (TailBuffers::rows_past_count_readable); else the count,
// read here: one dependent load before the latent's.
__device__ __forceinline__ int ReadRowsAfterWait(const int32_t* count, int rows_before_wait,
                                                 bool past_count_readable, int rows) {
  if (rows_before_wait >= 0) return rows_before_wait;
  return past_count_readable ? rows : LiveRows(count, rows);
}
__device__ __forceinline__ int ReadRowsAfterWait(const int32_t* count, EarlyCount early,
                                                 bool past_count_readable, int rows) {
  if (early.read) return max(0, min(early.value, rows));
  return past_count_readable ? rows : LiveRows(count, rows);
}
// The live rows, which a block writes, as loaded: `read_rows`, or where rows past the count are
// readable and the count was not read early, the count as loaded, pinned right after the wait,
// ahead of the latent's loads. Clamp it (ClampRows) only where it is first used, after those
// loads are issued: clamped here, a warp waited for the count before issuing them, 0.2-0.3 us at
// 12 x 64 and 64 x 16 (docs/design.md).
__device__ __forceinline__ int LiveRowsAsLoaded(const int32_t* count, bool early,
                                                bool past_count_readable, int read_rows) {
  if (!past_count_readable || early) return read_rows;
  int n;
  asm volatile("ld.global.s32 %0, [%1];" : "=r"(n) : "l"(count));
  return n;
}
__device__ __forceinline__ int ClampRows(int n, int rows) { return max(0, min(n, rows)); }
// The same, clamped here: where the compiler's schedule puts the clamp after the block's loads
// anyway (the Tile rings), clamping at the first use measured slower (docs/design.md).
__device__ __forceinline__ int LiveRowsAfterWait(const int32_t* count, bool early,
                                                 bool past_count_readable, int rows,
                                                 int read_rows) {
  if (!past_count_readable || early) return read_rows;
  return ClampRows(LiveRowsAsLoaded(count, false, true, read_rows), rows);
}

// The shared-memory address of a generic pointer into shared memory, as PTX operands take it.
__device__ __forceinline__ uint32_t SmemAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16-byte read-only load of data no kernel writes during this grid (weights). Like every cp.async
// copy of the fused kernels, it asks L2 to fetch whole 128-byte lines (L2::128B; docs/design.md,
// "The L2 prefetch-size hint").
__device__ __forceinline__ uint4 LoadWeight16(const void* pointer) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(pointer));
  return v;
}

// 16-byte global -> shared copy to shared address `dst`: `src_bytes` (16 or 0) of them read, the
// rest zero-filled. Like every 8- and 16-byte cp.async of the fused kernels, it asks L2 to fetch
// whole 128-byte lines.
__device__ __forceinline__ void CopyAsync16To(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// 8-byte global -> shared copy to shared address `dst` (through L1: cp.async of fewer than 16
// bytes must use .ca).
__device__ __forceinline__ void CopyAsync8To(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}

// 16-byte global -> shared copy; with `valid` false the 16 bytes are zero-filled and `src` is
// not read.
__device__ __forceinline__ void CopyAsync16(void* smem, const void* src, bool valid) {
  CopyAsync16To(SmemAddress(smem), src, valid ? 16 : 0);
}

// 4-byte global -> shared copy (through L1: cp.async of fewer than 16 bytes must use .ca); with
// `valid` false the 4 bytes are zero-filled and `src` is not read.
__device__ __forceinline__ void CopyAsync4(void* smem, const void* src, bool valid) {
  const uint32_t dst = SmemAddress(smem);
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void CopyAsyncCommitAndWaitAll() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
}

// Closes the group of this thread's cp.async copies issued since the last commit.
__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most `kPending` of this thread's most recent groups are still in flight; the
// other threads' copies are visible only after a barrier.
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// D += A(16x16, row) * B(16x8, col), bf16 in, fp32 accumulate.
__device__ __forceinline__ void MmaBf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                        uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// FP32 sigmoid with the accurate expf (the build does not use fast math); not rounded to bf16.
__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float2 Bf16x2ToFloat2(uint32_t word) {
  __nv_bfloat162 pair;
  memcpy(&pair, &word, sizeof(word));
  return __bfloat1622float2(pair);
}

// out = active ? bf16(v * sigmoid(g)) : +0 for two adjacent columns; v already bf16-exact.
__device__ __forceinline__ uint32_t GatePair(float v0, float v1, uint32_t gate_word, bool active) {
  if (!active) return 0u;  // +0.0 twice, whatever the gate holds
  const float2 g = Bf16x2ToFloat2(gate_word);
  const __nv_bfloat162 out = __floats2bfloat162_rn(v0 * Sigmoid(g.x), v1 * Sigmoid(g.y));
  uint32_t word;
  memcpy(&word, &out, sizeof(word));
  return word;
}

// out = active ? bf16(v) : +0 for two adjacent columns without a gate; v already bf16-exact.
__device__ __forceinline__ uint32_t ValuePair(float v0, float v1, bool active) {
  const __nv_bfloat162 out = __floats2bfloat162_rn(v0, v1);
  uint32_t word;
  memcpy(&word, &out, sizeof(word));
  return word & (0u - static_cast<uint32_t>(active));  // a mask, not a branch: +0.0 twice
}

// 1 / d rounded to nearest for 2^-126 <= d < 2^126: the instructions of the compiler's IEEE
// division in that range (reciprocal estimate, one correcting FMA step), without the branch to
// its general path for the rest.
__device__ __forceinline__ float ReciprocalInRange(float d) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  return __fmaf_rn(r, -__fmaf_rn(d, r, -1.0f), r);
}

// s for two adjacent columns as GatePair computes it (the division), whatever the gate.
__device__ __forceinline__ float2 SigmoidPair(uint32_t gate_word) {
  const float2 g = Bf16x2ToFloat2(gate_word);
  return {Sigmoid(g.x), Sigmoid(g.y)};
}

// SigmoidPair without a branch, for gates g > -87.3 (1 + exp(-g) < 2^126), where it is equal to
// SigmoidPair bit for bit; clears `in_range` on an active row whose gate is lower or NaN.
__device__ __forceinline__ float2 SigmoidPairInRange(uint32_t gate_word, bool active,
                                                     bool& in_range) {
  const float2 g = Bf16x2ToFloat2(gate_word);
  const float d0 = 1.0f + expf(-g.x);
  const float d1 = 1.0f + expf(-g.y);
  // Bitwise, not short-circuit, operators: a short circuit is a branch.
  in_range = in_range & (!active | ((d0 < 0x1p126f) & (d1 < 0x1p126f)));
  return {ReciprocalInRange(d0), ReciprocalInRange(d1)};
}

// out = active ? bf16(v * s) : +0 for two adjacent columns, v already bf16-exact; with s from
// SigmoidPair this is GatePair bit for bit.
__device__ __forceinline__ uint32_t GateWithSigmoid(float v0, float v1, float2 s, bool active) {
  const __nv_bfloat162 out = __floats2bfloat162_rn(v0 * s.x, v1 * s.y);
  uint32_t word;
  memcpy(&word, &out, sizeof(word));
  return word & (0u - static_cast<uint32_t>(active));  // a mask, not a branch: +0.0 twice
}

// GatePair without a branch, for gates g > -87.3, where it is equal to GatePair bit for bit;
// clears `in_range` on an active row whose gate is lower or NaN. GateWithSigmoid of
// SigmoidPairInRange, written out: composed from them, ptxas scheduled the 64 x 128 Tile
// epilogue differently, and the kernels keep the code that was measured.
__device__ __forceinline__ uint32_t GatePairInRange(float v0, float v1, uint32_t gate_word,
                                                    bool active, bool& in_range) {
  const float2 g = Bf16x2ToFloat2(gate_word);
  const float d0 = 1.0f + expf(-g.x);
  const float d1 = 1.0f + expf(-g.y);
  // Bitwise, not short-circuit, operators: a short circuit is a branch.
  in_range = in_range & (!active | ((d0 < 0x1p126f) & (d1 < 0x1p126f)));
  const __nv_bfloat162 out =
      __floats2bfloat162_rn(v0 * ReciprocalInRange(d0), v1 * ReciprocalInRange(d1));
  uint32_t word;
  memcpy(&word, &out, sizeof(word));
  return word & (0u - static_cast<uint32_t>(active));  // a mask, not a branch: +0.0 twice
}

// out[i] = GatePair(v[2i], v[2i + 1], gate[i], active[i]) for a thread's kN pairs. Not GatePair
// in a loop: the division's branch to its general path would make each pair a block of its own,
// paying the pairs' exp and reciprocal latencies one after another (docs/design.md). Here all
// pairs are computed without branches; only a thread with a gate below -87.3 or NaN on an active
// row computes them again the general way.
template <int kN>
__device__ __forceinline__ void GatePairs(const float (&v)[2 * kN], const uint32_t (&gate)[kN],
                                          const bool (&active)[kN], uint32_t (&out)[kN]) {
  bool in_range = true;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    out[i] = GatePairInRange(v[2 * i], v[2 * i + 1], gate[i], active[i], in_range);
  }
  if (!in_range) {
#pragma unroll
    for (int i = 0; i < kN; ++i) out[i] = GatePair(v[2 * i], v[2 * i + 1], gate[i], active[i]);
  }
}

// bf16 +inf twice: the gate word of a tail without a gate in kernels that take the gate's presence
// at run time. Its sigmoid is exactly 1 (1 + expf(-inf) = 1, whose reciprocal is 1), so
// GatePair(v, kNoGateWord) is ValuePair(v) bit for bit, NaN, infinities and -0.0 included.
inline constexpr uint32_t kNoGateWord = 0x7F807F80u;

// The gate word at gate + offset, or kNoGateWord where there is no gate (gate == nullptr).
__device__ __forceinline__ uint32_t GateWordOrNone(const __nv_bfloat16* gate, int64_t offset) {
  return gate != nullptr ? *reinterpret_cast<const uint32_t*>(gate + offset) : kNoGateWord;
}

// How a kernel with gate words in registers loads them (ColumnSplit, LatentSplit).
// - kNone: the tail without a gate; none loaded.
// - kPlain: a gate, loaded from p.gate.
// - kOrNone: p.gate, or kNoGateWord without one (a null check at each load: GateWordOrNone).
// - kWords: p.gate, or kNoGateWordInMemory without one (no branch at the loads: GateWords).
// The last two serve the tail without a gate with the gated form's code: compiled apart, without
// gate loads, the ungated kernels measured slower than the gated ones (docs/design.md, "No gate").
enum class GateLoads { kNone, kPlain, kOrNone, kWords };
__host__ __device__ constexpr bool Gated(GateLoads g) { return g != GateLoads::kNone; }
// Whether the form runs without a gate as well (p.gate null: kNoGateWord).
__host__ __device__ constexpr bool GateMayBeNull(GateLoads g) {
  return g == GateLoads::kOrNone || g == GateLoads::kWords;
}

// kNoGateWord in global memory, for loads that read it where there is no gate.
static __device__ const uint32_t kNoGateWordInMemory = kNoGateWord;

// A thread's gate words without a branch at each load: from the gate, or, without one, every load
// reads kNoGateWordInMemory (one cached word).
struct GateWords {
  const __nv_bfloat16* base;
  int64_t row_stride;  // elements; 0 without a gate
  int column_scale;    // 1, or 0 without a gate

  __device__ __forceinline__ static GateWords Of(const __nv_bfloat16* gate, int64_t row_stride) {
    if (gate != nullptr) return {gate, row_stride, 1};
    return {reinterpret_cast<const __nv_bfloat16*>(&kNoGateWordInMemory), 0, 0};
  }
  __device__ __forceinline__ uint32_t Load(int row, int column) const {
    return *reinterpret_cast<const uint32_t*>(base + row * row_stride + column * column_scale);
  }
};

// out[i] = ValuePair(v[2i], v[2i + 1], active[i]): the tail without a gate, which loads none.
template <int kN>
__device__ __forceinline__ void ValuePairs(const float (&v)[2 * kN], const bool (&active)[kN],
                                           uint32_t (&out)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) out[i] = ValuePair(v[2 * i], v[2 * i + 1], active[i]);
}

// The epilogue's step for a thread's kN pairs: GatePairs with a gate, ValuePairs without.
template <bool kGated, int kN>
__device__ __forceinline__ void EpiloguePairs(const float (&v)[2 * kN], const uint32_t (&gate)[kN],
                                              const bool (&active)[kN], uint32_t (&out)[kN]) {
  if constexpr (kGated) {
    GatePairs(v, gate, active, out);
  } else {
    ValuePairs(v, active, out);
  }
}

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_DEVICE_CUH_

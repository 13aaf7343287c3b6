#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 at heads {8, 12, 16, 32, 64, 96, 128} x rows {1, 2, 4, ..., 1024}, q 1,
// every kernel forced at every shape, L2 cold (bench/results/2026-11-30-h200/
// tail_bench_kernels_c57c26c.csv): the kernel picked is within 3% of the fastest at all 77
// shapes there, and the full grid (tail_bench.csv) checks it again. With W = heads x rows:
// - MlaValue (column split, W_UV in registers) while the batch is small: rows <= 16, or
//   W <= 1024. It re-reads W_UV for every 16-32 rows, so its time grows with rows.
// - MlaValueWgmma with K split over a cluster of 2 blocks for heads <= 32 up to W = 3072: few
//   heads give few tiles, and splitting K spreads each tile's bytes over more multiprocessors.
// - MlaValueWgmma with a 4-stage pipeline up to W = 12288, but MlaValueTile with 128-column
//   blocks at heads >= 128 from 64 rows (9% faster at 128 x 64).
// - The cuBLASLt batched GEMM + MlaGate beyond: its GEMM feeds the tensor cores better than
//   these kernels do at large batches, which outweighs the values' round trip through memory.
// MlaValueTile with 64-column blocks is never picked (within 3% of the fastest at four shapes,
// the fastest at none by more than 1%); it stays as a forced variant for measurements.

namespace mla {

enum class TailKernel {
  kColumnSplit,  // MlaValue
  kWgmmaK2,      // MlaValueWgmma, K split over 2 blocks
  kWgmmaP4,      // MlaValueWgmma, 4-stage pipeline
  kTile64,       // MlaValueTile, 64-column blocks
  kTile128,      // MlaValueTile, 128-column blocks
  kBmm,          // cuBLASLt batched GEMM + MlaGate
};

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  if (rows <= 16 || work <= 1024) return TailKernel::kColumnSplit;
  if (heads <= 32 && work <= 3072) return TailKernel::kWgmmaK2;
  if (work <= 12288) {
    return heads >= 128 && rows >= 64 ? TailKernel::kTile128 : TailKernel::kWgmmaP4;
  }
  return TailKernel::kBmm;
}

// The path half of the rule: true where the BMM path runs.
constexpr bool value_bmm(int heads, int rows) {
  return DispatchTail(heads, rows) == TailKernel::kBmm;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

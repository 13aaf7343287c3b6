#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 at heads {8, 12, 16, 32, 64, 96, 128} x rows {1, 2, 4, ..., 1024}, q 1,
// every kernel forced at every shape, L2 cold (bench/results/2026-11-30-h200/
// tail_bench_kernels_c57c26c.csv, and again at 043ec8a in tail_bench.csv): the kernel picked is
// within 3% of the fastest at all 77 shapes of both runs. With W = heads x rows:
// - MlaValue (column split, W_UV in registers) while the batch is small: rows <= 16, or
//   W <= 1024. It re-reads W_UV for every 16-32 rows, so its time grows with rows.
// - MlaValueWgmma with K split over a cluster of 2 blocks for heads <= 32 up to W = 3072: few
//   heads give few tiles, and splitting K spreads each tile's bytes over more multiprocessors.
// - MlaValueTile with 128-column blocks from W = 8192 to 16384 at 64-128 rows where its grid
//   (heads x rows / 64 blocks, two a multiprocessor) fills whole waves of the H200's 132
//   multiprocessors: at most 132 blocks or at least 256 (heads 64 and 128; at heads 96, 192
//   blocks leave 72 multiprocessors with one block and the pipelined MlaValueWgmma is 5% ahead).
// - MlaValueWgmma with a 4-stage pipeline otherwise up to W = 12288.
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
  const long long tile_blocks = heads * ((rows + 63LL) / 64);
  if (work >= 8192 && work <= 16384 && rows <= 128 && (tile_blocks <= 132 || tile_blocks >= 256)) {
    return TailKernel::kTile128;
  }
  if (work <= 12288) return TailKernel::kWgmmaP4;
  return TailKernel::kBmm;
}

// The path half of the rule: true where the BMM path runs.
constexpr bool value_bmm(int heads, int rows) {
  return DispatchTail(heads, rows) == TailKernel::kBmm;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 at heads {8, 12, 16, 32, 64, 96, 128} x rows {1, 2, 4, ..., 1024}, q 1,
// every kernel forced at every shape, L2 cold, W = heads x rows. Where the kernels prefetch
// (kernels/prefetch.cuh: W <= 8192, MlaValueTile W <= 4096) the data are the kernels as they are
// now (bench/results/2026-11-30-h200/history/final6_33bb161/tail_bench.csv); elsewhere the
// earlier run without the prefetch (history/tail_bench_e4de9a5.csv). The kernel picked was within
// 3% of the fastest at every shape; tail_bench.csv checks it again.
// - MlaValue (column split, W_UV in registers) while the batch is small: rows <= 16, or
//   W <= 1024. It re-reads W_UV for every 16-32 rows, so its time grows with rows.
// - MlaValueWgmma with K split over a cluster of 2 blocks for heads <= 32 up to W = 3072: few
//   heads give few tiles, and splitting K spreads each tile's bytes over more multiprocessors.
// - MlaValueTile from W = 8192 (64-column blocks) to 16384 (128-column blocks) where its grid
//   (heads x rows / 64 tiles, two blocks a multiprocessor) fills whole waves of the H200's 132
//   multiprocessors: at most 132 tiles or at least 256 (at W = 8192 only up to 128 rows, where
//   the pipelined MlaValueWgmma, faster with the prefetch, does not win). At heads 12 and 96
//   (192 tiles at W = 12288), 72 multiprocessors hold one block and MlaValueWgmma is 6-11% ahead.
// - MlaValueWgmma with a 4-stage pipeline otherwise up to W = 12288, and up to W = 24576 for
//   rows <= 256 (only 96 x 256 on the grid: 6% ahead of the BMM path; the tile's 384 blocks are
//   1.5 waves).
// - The cuBLASLt batched GEMM + MlaGate beyond: its GEMM feeds the tensor cores better than
//   these kernels do at large batches, which outweighs the values' round trip through memory.

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
  const bool whole_waves = tile_blocks <= 132 || tile_blocks >= 256;
  if (whole_waves && work >= 8192 && work <= 16384 && (work > 8192 || rows <= 128)) {
    return work <= 8192 ? TailKernel::kTile64 : TailKernel::kTile128;
  }
  if (work <= 12288 || (work <= 24576 && rows <= 256)) return TailKernel::kWgmmaP4;
  return TailKernel::kBmm;
}

// The path half of the rule: true where the BMM path runs.
constexpr bool value_bmm(int heads, int rows) {
  return DispatchTail(heads, rows) == TailKernel::kBmm;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

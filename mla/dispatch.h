#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 at heads {8, 12, 16, 32, 64, 96, 128} x rows {1, 2, 4, ..., 1024}, q 1,
// every kernel forced at every shape, L2 cold, W = heads x rows, with the kernels as they are
// now (the branch-free gate, kernels/device.cuh GatePairs):
// bench/results/2026-11-30-h200/history/gate8_52d6fa2/tail_bench.csv, and for all-in-flight
// MlaValueWgmma history/a8_cec9b38/tail_bench.csv. The kernel picked was within 3% of the fastest
// at every shape; tail_bench.csv checks it again.
// - MlaValue (column split, W_UV in registers) up to W = 512, and for rows <= 16 up to W = 1024
//   at heads <= 96. It re-reads W_UV for every 16-32 rows, so its time grows with rows. At 64 x 16
//   rows it ties the pipelined MlaValueWgmma in the grid but is the one whose W_UV fetch hides
//   behind an upstream kernel (it loads all of it before the dependency wait, the pipeline only
//   its first steps' slices): 2.9 against 4.4 us added after an upstream with a 5 us window
//   (tail_bench_upstream.csv at b6f10b4 and a504da6).
// - MlaValueWgmma with K split over a cluster of 2 blocks for heads <= 16 up to W = 1024: few
//   heads give few tiles, and splitting K spreads each tile's bytes over more multiprocessors.
// - MlaValueWgmma with all 8 K steps in flight where its grid (2 x heads x rows / 64 blocks, one a
//   multiprocessor) is at most 96 blocks: one memory round trip a tile instead of a pipeline,
//   12-16% ahead of the pipelined one at 8 x 256, 12 x 128, 16 x 128, 32 x 32 and 32 x 64 rows
//   (history/a8_cec9b38/tail_bench.csv); at 128 blocks it falls 5-15% behind.
// - MlaValueTile for heads >= 64 from W = 8192 (64-column blocks) to 16384 (128-column blocks)
//   where its grid (heads x rows / 64 tiles, two blocks a multiprocessor) fills whole waves of the
//   H200's 132 multiprocessors: at most 132 tiles or at least 256 (up to 6% and 9% ahead at
//   128 x 64 and 128 x 128). At fewer heads it trails MlaValueWgmma by 7-12%.
// - The cuBLASLt batched GEMM + MlaGate for heads > 96 from W = 65536 (128 x 512: 5% ahead of
//   MlaValueWgmma): its GEMM feeds the tensor cores better than these kernels at the largest
//   batches, which outweighs the values' round trip through memory.
// - MlaValueWgmma with a 4-stage pipeline everywhere else: since the gate lost its branches, the
//   fastest kernel from the middle of the grid to 96 x 1024 rows.

namespace mla {

enum class TailKernel {
  kColumnSplit,  // MlaValue
  kWgmmaK2,      // MlaValueWgmma, K split over 2 blocks
  kWgmmaA8,      // MlaValueWgmma, all 8 K steps in flight
  kWgmmaP4,      // MlaValueWgmma, 4-stage pipeline
  kTile64,       // MlaValueTile, 64-column blocks
  kTile128,      // MlaValueTile, 128-column blocks
  kBmm,          // cuBLASLt batched GEMM + MlaGate
};

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  if (work <= 512 || (rows <= 16 && heads <= 96 && work <= 1024)) {
    return TailKernel::kColumnSplit;
  }
  if (heads <= 16 && work <= 1024) return TailKernel::kWgmmaK2;
  if (2 * heads * ((rows + 63LL) / 64) <= 96) return TailKernel::kWgmmaA8;
  const long long tile_blocks = heads * ((rows + 63LL) / 64);
  const bool whole_waves = tile_blocks <= 132 || tile_blocks >= 256;
  if (heads >= 64 && whole_waves && work >= 8192 && work <= 16384) {
    return work <= 8192 ? TailKernel::kTile64 : TailKernel::kTile128;
  }
  if (heads > 96 && work >= 65536) return TailKernel::kBmm;
  return TailKernel::kWgmmaP4;
}

// The path half of the rule: true where the BMM path runs.
constexpr bool value_bmm(int heads, int rows) {
  return DispatchTail(heads, rows) == TailKernel::kBmm;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

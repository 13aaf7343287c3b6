#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 at heads {8, 12, 16, 32, 64, 96, 128} x rows {1, 4, 16, ..., 1024}, q 1,
// every kernel forced at every shape, L2 cold (bench/results/2026-11-30-h200/
// tail_bench_kernels_a23a16f.csv), then checked on the full grid at b2a7e30 (history/) and
// e4de9a5 (tail_bench.csv): the kernel picked within 3% of the fastest at 77 of 77 shapes.
// With W = heads x rows:
// - MlaValue (column split, W_UV in registers) while the batch is small: rows <= 16, or
//   heads <= 16 with W < 768. It re-reads W_UV for every 16-32 rows, so its time grows with rows.
// - MlaValueWgmma with K split over 4 blocks for heads <= 12 up to W = 1536, over 2 blocks for
//   heads <= 32 up to W = 4096: few heads give few tiles, and splitting K spreads each tile's
//   bytes over more multiprocessors.
// - MlaValueWgmma with a 4-stage pipeline for heads <= 16 up to W = 12288.
// - MlaValueTile with 64-column blocks up to W = 8192, with 128-column blocks below W = 24576
//   for rows <= 512.
// - The cuBLASLt batched GEMM + MlaGate beyond: its GEMM feeds the tensor cores better than
//   these kernels do at large batches, which outweighs the values' round trip through memory.
// - One exception, measured in both runs and not understood: at heads = 96 the pipelined
//   MlaValueWgmma was the fastest at every rows <= 256 (4-12% ahead of the kernel the rule
//   above picks), though not at heads 64 or 128, where MlaValue and MlaValueTile win.

namespace mla {

enum class TailKernel {
  kColumnSplit,  // MlaValue
  kWgmmaK4,      // MlaValueWgmma, K split over 4 blocks
  kWgmmaK2,      // MlaValueWgmma, K split over 2 blocks
  kWgmmaP4,      // MlaValueWgmma, 4-stage pipeline
  kTile64,       // MlaValueTile, 64-column blocks
  kTile128,      // MlaValueTile, 128-column blocks
  kBmm,          // cuBLASLt batched GEMM + MlaGate
};

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  if (heads == 96 && rows <= 256) return TailKernel::kWgmmaP4;  // measured; see above
  if (rows <= 16 || (heads <= 16 && work < 768)) return TailKernel::kColumnSplit;
  if (heads <= 12 && work <= 1536) return TailKernel::kWgmmaK4;
  if (heads <= 32 && work <= 4096) return TailKernel::kWgmmaK2;
  if (heads <= 16 && work <= 12288) return TailKernel::kWgmmaP4;
  if (work <= 8192) return TailKernel::kTile64;
  if (work < 24576 && rows <= 512) return TailKernel::kTile128;
  return TailKernel::kBmm;
}

// The path half of the rule: true where the BMM path runs.
constexpr bool value_bmm(int heads, int rows) {
  return DispatchTail(heads, rows) == TailKernel::kBmm;
}

}  // namespace mla

#endif  // MLA_DISPATCH_H_

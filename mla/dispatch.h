#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 at heads {8..128} x rows {1..1024}, q 1 (and q 2, 4 spot checks), every
// kernel forced at every shape (bench/results/2026-11-30-h200/tail_bench.csv, README
// "Dispatch"). With W = heads x rows:
// - MlaValue (column split, W_UV in registers) is fastest while the work is small: rows < 32,
//   or W < 2048, or W = 2048 with rows >= 128. It re-reads W_UV for every 16-32 rows, so its
//   time grows with rows past that.
// - MlaValueTile with 64-column blocks from there up to W = 8192: about 5 us of pipeline latency
//   that the column split does not have, but W_UV read once per 64 rows and twice the blocks
//   of the 128-column tile.
// - MlaValueTile with all 128 columns a block for 8192 < W < 24576 and rows <= 512.
// - The cuBLASLt batched GEMM + MlaGate beyond (W >= 24576, or rows > 512 past W = 8192): its
//   GEMM feeds the tensor cores better than the mma.sync tile kernel does, which outweighs
//   the values' round trip through memory.
// Drawn from the grid at commit ebb43dc and checked by the closing run at 0b1d08e (95 shapes):
// the dispatched kernel was within 3% of the fastest there but at two shapes, H = 32 x 2 rows
// (the same kernel, 3.4% apart between two runs of it) and H = 32 x 64 rows (split 3.1% slower
// than the 64-column tile; W = 2048 with rows < 128 takes the tile since that run).

namespace mla {

enum class TailKernel {
  kColumnSplit,  // MlaValue
  kTile64,       // MlaValueTile, 64-column blocks
  kTile128,      // MlaValueTile, 128-column blocks
  kBmm,          // cuBLASLt batched GEMM + MlaGate
};

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  if (rows < 32 || work < 2048 || (work == 2048 && rows >= 128)) return TailKernel::kColumnSplit;
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

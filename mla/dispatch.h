#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 (132 multiprocessors) at heads {8, 12, 16, 32, 64, 96, 128} x rows
// {1, 2, 4, ..., 1024}, q 1, every kernel forced at every shape, L2 cold, W = heads x rows:
// bench/results/2026-11-30-h200/history/wide8_7d820e6/tail_bench.csv for MlaValueWgmma's
// configurations from 16 rows on, history/gate8_52d6fa2/tail_bench.csv for MlaValue. The kernel
// picked was within 3% of the fastest at every shape; tail_bench.csv checks it again.
// - MlaValue (column split, W_UV in registers) up to W = 512, and for rows <= 16 up to W = 1024
//   at heads <= 96. It re-reads W_UV for every 16-32 rows, so its time grows with rows. At 64 x 16
//   rows it is within 3% of the pipelined MlaValueWgmma in the grid and is the one whose W_UV
//   fetch hides behind an upstream kernel (it loads all of it before the dependency wait, the
//   pipeline only its first steps' slices): 2.9 against 4.4 us added after an upstream with a
//   5 us window (tail_bench_upstream.csv at b6f10b4 and a504da6).
// - MlaValueWgmma with K split over a cluster of 2 blocks for heads <= 16 up to W = 1024: few
//   heads give few tiles, and splitting K spreads each tile's bytes over more multiprocessors.
// - All 8 K steps in flight where the 64 x 64 grid (2 x heads x rows / 64 blocks, one a
//   multiprocessor) is at most 96 blocks: one memory round trip a tile instead of a pipeline.
// - The persistent 128 x 128 tiles from 128 rows where there are at least 128 tiles (heads x
//   rows / 128): 8-24% ahead of the 64 x 64 pipeline and 3-19% ahead of the BMM path from 32 x
//   1024, 64 x 256 and 96 x 256 rows on (128 x 1024: 67.2 against 82.5 us for the BMM path).
//   With fewer tiles than multiprocessors, or with tiles mostly empty (128 heads x 16-64 rows),
//   it trails.
// - The 64 x 128 tiles where, with full 64-row tiles, their grid fills the multiprocessors once
//   (heads x rows / 64 in 119-132 blocks: 8 x 1024, 16 x 512, 32 x 256, 64 x 128, 128 x 64):
//   up to 13% ahead of the 64 x 64 pipeline, which reads each latent row twice. At 64 or 96
//   blocks (SMs left idle) and at 192 (a second block on some) the 64 x 64 pipeline is ahead.
// - The 64 x 64 pipeline everywhere else.
// The cuBLASLt batched GEMM + MlaGate (the BMM path) is not the fastest at any measured shape
// since the persistent kernel (it was at 128 heads x 512-1024 rows before): it stays selectable
// with TailPath::kBmm.

namespace mla {

enum class TailKernel {
  kColumnSplit,      // MlaValue
  kWgmmaK2,          // MlaValueWgmma, 64 x 64 tiles, K split over 2 blocks
  kWgmmaA8,          // MlaValueWgmma, 64 x 64 tiles, all 8 K steps in flight
  kWgmmaP4,          // MlaValueWgmma, 64 x 64 tiles, 4-stage pipeline
  kWgmmaN128,        // MlaValueWgmma, 64 x 128 tiles
  kWgmmaPersistent,  // MlaValueWgmma, 128 x 128 tiles, persistent
};

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  if (work <= 512 || (rows <= 16 && heads <= 96 && work <= 1024)) {
    return TailKernel::kColumnSplit;
  }
  if (heads <= 16 && work <= 1024) return TailKernel::kWgmmaK2;
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  if (2 * tiles_64 <= 96) return TailKernel::kWgmmaA8;
  if (rows >= 128 && heads * ((rows + 127LL) / 128) >= 128) return TailKernel::kWgmmaPersistent;
  if (rows >= 64 && tiles_64 >= 119 && tiles_64 <= 132) return TailKernel::kWgmmaN128;
  return TailKernel::kWgmmaP4;
}

// The path half of the rule: true where the BMM path runs (at no measured shape, above).
constexpr bool value_bmm(int /*heads*/, int /*rows*/) { return false; }

}  // namespace mla

#endif  // MLA_DISPATCH_H_

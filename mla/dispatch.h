#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on an H200 (132 multiprocessors) at heads {8, 12, 16, 32, 64, 96, 128} x rows
// {1, 2, 4, ..., 1024}, q 1, every kernel forced at every shape, L2 cold, W = heads x rows:
// bench/results/2026-11-30-h200/history/final12_f92bae3/tail_bench.csv (every kernel but the
// all-in-flight one as it is now) and history/overlap10_92b7540/tail_bench_small.csv (that one,
// "wgmma-a8-o" there, from 16 rows on), and history/final14_5b70aff/tail_bench.csv for the
// 4-stage pipeline with its launch bounds (since then ahead of MlaValue at 96 x 16). The kernel
// picked was within 3% of the fastest at every shape; tail_bench.csv checks it again.
// - MlaValue (column split, W_UV in registers) up to 16 rows at up to 96 heads (16 rows: up to
//   64) and W = 512 at 128, up to W = 384, and at 8 heads up to W = 512. Its blocks are small
//   (17 KB of shared memory) and many and load W_UV into registers before the dependency wait,
//   which wins while the rows are few; it re-reads W_UV for every 16-32 rows, so its time grows
//   with rows. At 32 x 16 and 64 x 16 the all-in-flight MlaValueWgmma is 2-4% ahead in the grid,
//   but after an upstream kernel that holds 100 KB of shared memory a block (attention kernels
//   hold much) its 140 KB blocks cannot join the multiprocessors until the upstream drains, so
//   its W_UV fetch does not hide: at 64 x 16 it adds 4.09 us to MlaValue's 2.69 with a 5 us
//   window (history/final15_c03324f/tail_bench_upstream.csv; 2.68 in tail_bench_upstream.csv).
//   The performance issue's goal 4 is about exactly those shapes (heads <= 64, rows <= 16).
// - MlaValueWgmma with all 8 K steps in flight where its 64 x 64 grid (2 x heads x rows / 64
//   blocks of 140 KB) fits the multiprocessors one block each: one memory round trip a tile
//   instead of a pipeline, and (since overlap10) each step's MMAs run on while the next step
//   lands, 5-12% faster than before; it replaced the K split over a cluster of 2 blocks, which
//   it now beats at every shape, and ties the 4-stage pipeline (within 2%) at 128 blocks. It
//   issues all its W_UV copies before the dependency wait too, but after a 100 KB upstream they
//   start late (above): there MlaValue adds 0.3-0.6 us less at 12-16 heads x 32-64 rows
//   (tail_bench_upstream_a8.csv), a context this grid-measured rule does not see.
// - The persistent 128 x 128 tiles from 128 rows where there are at least 128 tiles (heads x
//   rows / 128), since the seventh session warp-specialized (MlaValueWgmma-ws,
//   history/ws3_1138687): 2-10% ahead of the block-synchronous persistent kernel it replaced
//   from 512 rows at 32-128 heads and at 96-128 x 256 (128 x 1024: 60.7 against 67.1 us; the
//   BMM path took 82), 5-11% ahead at 2048 and 4096 rows, at most 1.7% behind it where each
//   block has one tile (128 tiles). That kernel was itself 8-24% ahead of the 64 x 64 pipeline
//   from 32 x 1024, 64 x 256 and 96 x 256 on. With fewer tiles than multiprocessors, or with
//   tiles mostly empty (128 heads x 16-64 rows), the persistent tiles trail.
// - The 64 x 128 tiles where, with full 64-row tiles, their grid fills the multiprocessors once
//   (heads x rows / 64 in 119-132 blocks: 8 x 1024, 16 x 512, 32 x 256, 64 x 128, 128 x 64):
//   up to 13% ahead of the 64 x 64 pipeline, which reads each latent row twice. At 64 or 96
//   blocks (multiprocessors left idle) and at 192 (a second block on some) the 64 x 64 pipeline
//   is ahead.
// - The 64 x 64 pipeline everywhere else.
// The cuBLASLt batched GEMM + MlaGate (the BMM path) is the fastest at no measured shape since
// the persistent kernels (it was at 128 heads x 512-1024 rows before): it stays selectable with
// TailPath::kBmm.

namespace mla {

enum class TailKernel {
  kColumnSplit,      // MlaValue
  kWgmmaA8,          // MlaValueWgmma, 64 x 64 tiles, all 8 K steps in flight
  kWgmmaP4,          // MlaValueWgmma, 64 x 64 tiles, 4-stage pipeline
  kWgmmaN128,        // MlaValueWgmma, 64 x 128 tiles
  kWgmmaWs,          // MlaValueWgmma-ws, 128 x 128 tiles, persistent, warp-specialized
};

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  const bool few_rows =
      rows <= 16 && (work <= 512 || (heads <= 96 && (rows < 16 || work <= 1024)));
  if (few_rows || work <= 384 || (heads <= 8 && work <= 512)) return TailKernel::kColumnSplit;
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  if (2 * tiles_64 <= 132) return TailKernel::kWgmmaA8;
  if (rows >= 128 && heads * ((rows + 127LL) / 128) >= 128) return TailKernel::kWgmmaWs;
  if (rows >= 64 && tiles_64 >= 119 && tiles_64 <= 132) return TailKernel::kWgmmaN128;
  return TailKernel::kWgmmaP4;
}

// The path half of the rule: true where the BMM path runs (at no measured shape, above).
constexpr bool value_bmm(int /*heads*/, int /*rows*/) { return false; }

}  // namespace mla

#endif  // MLA_DISPATCH_H_

#ifndef MLA_DISPATCH_H_
#define MLA_DISPATCH_H_

// Which kernel a tail of `heads` heads and `rows` rows runs: the one measured rule, for the path
// (fused or BMM) and for the fused path's kernel.
//
// Measured on H200s (132 multiprocessors) at heads {8, 12, 16, 32, 64, 96, 128} x rows
// {1, 2, 4, ..., 1024}, q 1, every kernel forced at every shape, L2 cold, the tails of all layers
// in one graph; W = heads x rows, T = heads x ceil(rows / 64) (64-row tiles). Files under
// bench/results/2026-11-30-h200/: history/cfg22_41a9d4f, cfg23_41a9d4f and cfg24_39d1f62 (the
// eighth session's configurations against the others, each twice), history/final18_ffd2599 and
// the sixth and seventh sessions' files named below. The kernel picked is within 3% of the
// fastest at every shape but those named as deliberate; tail_bench.csv checks it again.
// - MlaValue (column split, W_UV in registers; 8-row blocks without shared memory up to 8 rows
//   and at 9-32 rows while they fit one a multiprocessor, else 17 KB blocks, MlaValueBlockRows)
//   up to 16 rows at up to 64 heads, up to W = 768 (96 x 8, 128 x 4), and at 17-32 rows where its
//   8-row blocks fit one a multiprocessor (up to 8 heads at 32 rows): there 2.5-11% faster than
//   the 64 x 32 tiles at 8 heads and 24-38% at 1-4, and 0.8 us less after the stand-in upstream
//   at 8 x 24-32 (history/rows63_4b15737). Its blocks
//   are small and load W_UV before the dependency wait, so after an upstream kernel that holds
//   much shared memory (attention kernels do; the benchmark's stand-in holds 100 KB a block)
//   they join its multiprocessors and fetch W_UV in its shadow, which blocks of 100 KB and more
//   cannot: with a 5 us window at 64 x 1-16 it adds 2.35-2.66 us where the 6-stage pipeline
//   adds 3.69-3.79, and 2.78-3.20 us at 96 x 1-8 against 4.48-4.57
//   (history/cfg24_39d1f62/tail_bench_upstream.csv; the 8-row blocks of the tenth session took
//   0.4-0.7 us more off at 64-96 x 1-8, history/up45_ac5627d). Goal 4 of the
//   performance issue is about exactly these shapes. Deliberate: with tails back to back (the
//   grid), where the next tail's blocks do join, the 64 x 32 all-in-flight tiles are 3-7% faster
//   at 32 x 1-16, the 6-stage pipeline 4-11% at 64 x 1-16, 96 x 1-8 and 128 x 1-4 (cfg23-24,
//   history/final25_387633d, history/grid30_ecdee44, and tail_bench.csv). Without PDL MlaValue
//   is the fastest there but at 128 x 16 (history/rule52_1e614c3/tail_bench_nopdl.csv): those
//   kernels lead only when tails follow tails, so the rule does not ask what precedes the tail.
// - MlaValueWgmma with 64 x 32 tiles and all 8 K steps in flight (101 KB, two blocks a
//   multiprocessor) while 4T <= 96 blocks: one memory round trip, twice the blocks of the 64 x 64
//   tiles; 5-15% ahead of every other kernel at 8-16 heads x 32-128 rows in cfg24 and grid30
//   (12 x 64: 2.39 against 2.82 us for the 64 x 64 tiles), 0-14% in final25.
// - The 64 x 64 tiles with all 8 steps in flight (140 KB, one block a multiprocessor) while
//   2T <= 96 blocks.
// - The persistent warp-specialized 128 x 128 tiles (MlaValueWgmma-ws, history/ws3_1138687,
//   even6_d5e7849) from 128 rows where there are at least 128 of them: the largest batches.
// - The 64 x 128 tiles where T is 119-132 (8 x 1024, 16 x 512, 32 x 256, 64 x 128, 128 x 64):
//   each latent row read once, the multiprocessors filled once (history/wide6_b499142).
// - The 6-stage 64 x 64 pipeline (105 KB: two blocks a multiprocessor, so the next tail's
//   blocks join while this one drains) while 2T <= 256 blocks: 5-12% ahead of the 4-stage
//   pipeline and of the all-in-flight tiles at 128 blocks (32 x 128, 64 x 32-64, 8 x 512,
//   16 x 256) and at 128 x 8-32 in cfg22-24 and grid30; on final25's H200 level (-4% to +1%) at
//   128 blocks.
// - The 4-stage 64 x 64 pipeline (73 KB, three blocks a multiprocessor) beyond: 96 x 128,
//   12 x 1024.
// The cuBLASLt batched GEMM + MlaGate (the BMM path) is the fastest at no measured shape since
// the persistent kernels (it was at 128 heads x 512-1024 rows before): it stays selectable with
// TailPath::kBmm.

namespace mla {

enum class TailKernel {
  kColumnSplit,  // MlaValue
  kWgmmaA8N32,   // MlaValueWgmma, 64 x 32 tiles, all 8 K steps in flight
  kWgmmaA8,      // MlaValueWgmma, 64 x 64 tiles, all 8 K steps in flight
  kWgmmaP6,      // MlaValueWgmma, 64 x 64 tiles, 6-stage pipeline
  kWgmmaP4,      // MlaValueWgmma, 64 x 64 tiles, 4-stage pipeline
  kWgmmaN128,    // MlaValueWgmma, 64 x 128 tiles
  kWgmmaWs,      // MlaValueWgmma-ws, 128 x 128 tiles, persistent, warp-specialized
};

// Whether MlaValue's 8-row blocks (32 columns each, ceil(rows / 8) of them a column block) at up
// to 32 rows fit one a multiprocessor of an H200 (132): the rule gives them those shapes, and
// MlaValueBlockRows runs 8-row blocks there.
constexpr bool EightRowBlocksFitOneWave(int heads, int rows) {
  return rows <= 32 && 4LL * heads * ((rows + 7) / 8) <= 132;
}

constexpr TailKernel DispatchTail(int heads, int rows) {
  const long long work = static_cast<long long>(heads) * rows;
  if (rows <= 16 && (heads <= 64 || work <= 768)) return TailKernel::kColumnSplit;
  if (EightRowBlocksFitOneWave(heads, rows)) return TailKernel::kColumnSplit;
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  if (4 * tiles_64 <= 96) return TailKernel::kWgmmaA8N32;
  if (2 * tiles_64 <= 96) return TailKernel::kWgmmaA8;
  if (rows >= 128 && heads * ((rows + 127LL) / 128) >= 128) return TailKernel::kWgmmaWs;
  if (rows >= 64 && tiles_64 >= 119 && tiles_64 <= 132) return TailKernel::kWgmmaN128;
  if (2 * tiles_64 <= 256) return TailKernel::kWgmmaP6;
  return TailKernel::kWgmmaP4;
}

// The path half of the rule: true where the BMM path runs (at no measured shape, above).
constexpr bool value_bmm(int /*heads*/, int /*rows*/) { return false; }

}  // namespace mla

#endif  // MLA_DISPATCH_H_

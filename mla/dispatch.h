#ifndef MLA_TAIL_MLA_DISPATCH_H_
#define MLA_TAIL_MLA_DISPATCH_H_

// The fused path's kernels and the measured rule that picks one for a shape. The measurements
// behind each threshold are in docs/design.md and docs/benchmarks.md; mla/dispatch_test.cc pins
// the rule at the measured shapes.

#include "mla_tail/mla/tail_args.h"

namespace mla_tail {

// The fused path's kernels. Each computes the tail of docs/spec.md; they add the products in
// different orders, so a value may differ by 1 bf16 ulp where the FP32 sum is not exact. A
// kernel's name is the same everywhere: the enumerator without its k, the kernel function and
// its file (kColumnSplit: ColumnSplitKernel in mla/kernels/column_split.cu; the kTile*
// configurations: TileKernel in tile.cu) and the label benchmarks record (FusedKernelName).
//
//   ColumnSplit         128 threads per (32 columns, head, 8/16/32 rows), W_UV in registers.
//   LatentSplit         a block per (16 columns, head, 8 or 16 rows) whose warps split the
//                       latent axis (8 warps with 8 rows, 4 with 16), W_UV in registers.
//   Tile*               wgmma from shared memory, 8 steps of 64 latent values; the
//                       configurations differ in the tile and in how the steps are brought in:
//   Tile64x64Pipeline4  64 x 64 tiles, a 4-stage pipeline (73 KB, three blocks an SM)
//   Tile64x64AllSteps   64 x 64 tiles, all 8 steps in flight (140 KB, one block an SM)
//   Tile64x128          64 x 128 tiles (each latent row read once), 4 stages, 2 warpgroups
//   Tile64x32AllSteps   64 x 32 tiles, all 8 steps in flight (101 KB, two blocks an SM)
//   Tile64x64Pipeline6  64 x 64 tiles, a 6-stage pipeline (105 KB, two blocks an SM)
//   Persistent128x128   persistent 128 x 128 tiles, one block an SM; a producer warpgroup's
//                       copies and two consumer warpgroups' MMAs hand a ring of 6 buffers over
//                       mbarriers.
#define MLA_TAIL_FUSED_KERNELS(X) \
  X(ColumnSplit)                  \
  X(LatentSplit)                  \
  X(Tile64x64Pipeline4)           \
  X(Tile64x64AllSteps)            \
  X(Tile64x128)                   \
  X(Tile64x32AllSteps)            \
  X(Tile64x64Pipeline6)           \
  X(Persistent128x128)

enum class FusedKernel {
  kAuto,  // the rule below decides by shape
#define MLA_TAIL_ENUMERATOR(name) k##name,
  MLA_TAIL_FUSED_KERNELS(MLA_TAIL_ENUMERATOR)
#undef MLA_TAIL_ENUMERATOR
};

// Every concrete kernel, for callers that force each in turn (tests, benchmarks).
inline constexpr FusedKernel kFusedKernels[] = {
#define MLA_TAIL_LIST_ENTRY(name) FusedKernel::k##name,
    MLA_TAIL_FUSED_KERNELS(MLA_TAIL_LIST_ENTRY)
#undef MLA_TAIL_LIST_ENTRY
};

// The kernel's name: its enumerator without the k ("ColumnSplit", "Tile64x64Pipeline4", ...;
// "Auto" for kAuto), as benchmark files record it.
const char* FusedKernelName(FusedKernel kernel);

// Whether LatentSplit's blocks (8 a head per 8 rows up to 8 rows, else per 16 rows) fit one
// an SM.
constexpr bool LatentSplitBlocksFitOneWave(int heads, int rows, int multiprocessors) {
  const int tile_rows = rows <= 8 ? 8 : 16;
  return 8LL * heads * ((rows + tile_rows - 1) / tile_rows) <= multiprocessors;
}

// Whether ColumnSplit's 8-row blocks (32 columns each, ceil(rows / 8) of them per column block) at
// up to 32 rows fit one an SM: the rule gives them those shapes, and ColumnSplit runs 8-row blocks
// there.
constexpr bool EightRowBlocksFitOneWave(int heads, int rows, int multiprocessors) {
  return rows <= 32 && 4LL * heads * ((rows + 7) / 8) <= multiprocessors;
}

// Whether `tiles` 64 x 128 tiles (one a multiprocessor) make one wave that fills the GPU: more
// than nine tenths of the multiprocessors busy and none with a second tile. Measured on 132 SMs,
// where that is 119-132 tiles: with fewer, the idle multiprocessors cost more than reading each
// latent row once saves; with more, some take two.
constexpr bool Tile64x128FillsOneWave(long long tiles, int multiprocessors) {
  return 10 * tiles > 9LL * multiprocessors && tiles <= multiprocessors;
}

// The rule for the e4m3 output, drawn from the grid with every kernel forced on it (bf16 and
// e4m3 W_UV): a head split over blocks exchanges its amax through a cluster (ColumnSplit,
// LatentSplit, the 64 x 32 and 64 x 64 tiles); the register kernels lead at few rows (with bf16
// W_UV ColumnSplit to 8 rows at up to 64 heads, 4 at 96, 16 at 16 and 32 at 8; with e4m3 W_UV
// LatentSplit to 16 rows at up to 16 heads, then ColumnSplit), the 6-stage pipeline around 64
// tiles, and the kernels that hold whole heads (the 64 x 128 tiles, Persistent128x128) beyond,
// at 128 heads already from 1 row with bf16 W_UV (docs/design.md, "The dispatch rule"). T counts
// 64-row tiles; its thresholds are measured crossovers on 132 SMs.
constexpr FusedKernel DispatchE4m3OutputKernel(int heads, int rows, WeightType weight) {
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  if (weight == WeightType::kE4m3) {
    if (rows <= 16 && heads <= 16) return FusedKernel::kLatentSplit;
    if (rows <= 8 || (rows <= 16 && heads >= 64)) return FusedKernel::kColumnSplit;
    if (tiles_64 >= 384) return FusedKernel::kPersistent128x128;
    if (tiles_64 > 96) return FusedKernel::kTile64x128;
    if (tiles_64 >= 64) return FusedKernel::kTile64x64Pipeline6;
    return tiles_64 <= 32 && rows <= 128 ? FusedKernel::kTile64x32AllSteps
                                         : FusedKernel::kTile64x64AllSteps;
  }
  if ((rows <= 8 && heads <= 64) || (rows <= 4 && heads <= 96) || (rows <= 16 && heads <= 16) ||
      (rows <= 32 && heads <= 8)) {
    return FusedKernel::kColumnSplit;
  }
  if (tiles_64 >= 256 || (rows >= 128 && heads >= 96)) return FusedKernel::kPersistent128x128;
  if (tiles_64 >= 48) {
    return tiles_64 <= 64 || (rows <= 32 && heads < 128) ? FusedKernel::kTile64x64Pipeline6
                                                         : FusedKernel::kTile64x128;
  }
  // From 16 tiles the 64 x 64 tiles, whose amax exchange is between two blocks, lead.
  return tiles_64 < 16 ? FusedKernel::kTile64x32AllSteps : FusedKernel::kTile64x64AllSteps;
}

// The rule, for a GPU with `multiprocessors` SMs (measured on H200s, 132). T counts 64-row
// tiles; the block-count thresholds (96, 256) are measured crossovers, not SM counts. e4m3 W_UV
// has a rule of its own, drawn from the grid with every kernel forced on e4m3 weights: the
// kernels that convert W_UV in registers (ColumnSplit, LatentSplit) lead further, and the
// tiles that convert it in shared memory lead later; so has the e4m3 output (above)
// (docs/design.md, "The dispatch rule").
constexpr FusedKernel DispatchFusedKernel(int heads, int rows, int multiprocessors,
                                          WeightType weight = WeightType::kBf16,
                                          OutputType output = OutputType::kBf16) {
  if (output == OutputType::kE4m3) {
    return DispatchE4m3OutputKernel(heads, rows, weight);
  }
  const long long work = static_cast<long long>(heads) * rows;
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  // 128 x 128 tiles, one a multiprocessor, at least 128 of them.
  const bool persistent_tiles = rows >= 128 && heads * ((rows + 127LL) / 128) >= 128;
  // The latent axis over a block's warps, up to 32 rows while its blocks fit one an SM.
  if (rows <= 32 && LatentSplitBlocksFitOneWave(heads, rows, multiprocessors)) {
    return FusedKernel::kLatentSplit;
  }
  if (weight == WeightType::kE4m3) {
    // Past one wave LatentSplit still leads at up to 16 heads to 32 rows, 28 heads to 8 rows and
    // 40 heads at 9-16 rows (its 16-row blocks; 32-40 heads at 1-8 rows take ColumnSplit).
    if ((rows <= 32 && heads <= 16) || (rows <= 8 && heads <= 28) ||
        (rows > 8 && rows <= 16 && heads <= 40)) {
      return FusedKernel::kLatentSplit;
    }
    if (rows <= 16 || (rows <= 32 && work <= 2048 && heads <= 64)) {
      return FusedKernel::kColumnSplit;
    }
    if (tiles_64 <= 32) return FusedKernel::kTile64x32AllSteps;
    // The 64 x 128 tiles in one wave: one a multiprocessor from 0.8 SMs of them, or two a
    // multiprocessor where the 4-stage ring's 64 x 64 tiles (three a multiprocessor) need a
    // second wave.
    const long long sms = multiprocessors;
    if ((5 * tiles_64 > 4 * sms && tiles_64 <= sms) ||
        (2 * tiles_64 > 3 * sms && tiles_64 <= 2 * sms)) {
      return FusedKernel::kTile64x128;
    }
    if (persistent_tiles) return FusedKernel::kPersistent128x128;
    return 2 * tiles_64 <= 256 ? FusedKernel::kTile64x64Pipeline6
                               : FusedKernel::kTile64x64Pipeline4;
  }
  // Past one wave LatentSplit still leads up to 8 rows at up to 64 heads, back to back and after
  // an attention-like upstream kernel, with PDL and without (only behind an upstream kernel that
  // holds no shared memory, with PDL, do ColumnSplit's blocks start earlier); but from 49 heads at
  // 1-2 rows ColumnSplit's 8-row blocks lead back to back and after the upstream kernels.
  if (rows <= 8 && heads <= 64 && !(rows <= 2 && heads > 48)) return FusedKernel::kLatentSplit;
  if (rows <= 16 && (heads <= 64 || work <= 768)) return FusedKernel::kColumnSplit;
  if (EightRowBlocksFitOneWave(heads, rows, multiprocessors)) return FusedKernel::kColumnSplit;
  if (4 * tiles_64 <= 96) return FusedKernel::kTile64x32AllSteps;
  if (2 * tiles_64 <= 96) return FusedKernel::kTile64x64AllSteps;
  if (persistent_tiles) return FusedKernel::kPersistent128x128;
  // One wave of 64 x 128 tiles that fills the GPU: each latent row read once.
  if (rows >= 64 && Tile64x128FillsOneWave(tiles_64, multiprocessors)) {
    return FusedKernel::kTile64x128;
  }
  if (2 * tiles_64 <= 256) return FusedKernel::kTile64x64Pipeline6;
  return FusedKernel::kTile64x64Pipeline4;
}

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_DISPATCH_H_

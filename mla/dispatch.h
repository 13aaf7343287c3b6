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
//   Tile64x64AllSteps   64 x 64 tiles, all 8 steps in flight (137 KB, one block an SM)
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

// The rule's parts, for DispatchFusedKernel and its tests; not part of the API.
namespace dispatch_internal {

// Whether LatentSplit's blocks (8 a head per 8 rows up to 8 rows, else per 16 rows) fit one
// an SM.
constexpr bool LatentSplitBlocksFitOneWave(int heads, int rows, int multiprocessors) {
  const long long tile_rows = rows <= 8 ? 8 : 16;
  return 8LL * heads * ((rows + tile_rows - 1) / tile_rows) <= multiprocessors;
}

// Whether ColumnSplit's 8-row blocks (32 columns each, ceil(rows / 8) of them per column block) at
// up to 32 rows fit one an SM: the rule gives them those shapes, and ColumnSplit runs 8-row blocks
// there.
constexpr bool EightRowBlocksFitOneWave(int heads, int rows, int multiprocessors) {
  return rows <= 32 && 4LL * heads * ((rows + 7) / 8) <= multiprocessors;
}

// Wave arithmetic: `units` blocks or tiles that run `slots` at a time.
constexpr long long Waves(long long units, long long slots) { return (units + slots - 1) / slots; }

// Whether `units` fill at least num/den of the slots of their waves.
constexpr bool FillsWaves(long long units, long long slots, int num, int den) {
  return den * units >= num * slots * Waves(units, slots);
}

// Whether `units_a` at `slots_a` a wave fill their waves more fully than `units_b` at `slots_b`.
constexpr bool FillsWavesMore(long long units_a, long long slots_a, long long units_b,
                              long long slots_b) {
  return units_a * slots_b * Waves(units_b, slots_b) > units_b * slots_a * Waves(units_a, slots_a);
}

// The tile kernels past one wave of 64-row tiles (T > SMs): the 4-stage ring (2T blocks of
// 64 x 64, three an SM), the 64 x 128 tiles (T blocks, two an SM) and Persistent128x128 (T128
// tiles of 128 rows, one an SM at a time). Drawn from every kernel forced at 8-512 rows in steps
// of 8 at the grid's head counts and at 11 head counts between them (docs/design.md, "The
// dispatch rule"):
// - the ring while its blocks make one wave: back to back Persistent128x128 is up to 9% faster
//   where a head's last 64-row tile is mostly empty (96 x 72-80), but after an attention-like
//   upstream kernel its one block an SM waits for the upstream blocks to leave and adds twice
//   the ring's time (96 x 80: 9.77 against 4.82 us);
// - Persistent128x128 where its tiles hold no more empty rows than the 64-row ones (T = 2 T128)
//   and fill 0.75 of their waves, or are at least 0.6 full and fill 0.8 (bf16 W_UV). e4m3 W_UV
//   converts a 128-row tile's W_UV once for all its rows: past one wave of them wherever they
//   hold no more empty rows, are 0.85 full or fill 0.75 of their waves, and within one where
//   they hold no more empty rows and fill 0.9 of it;
// - else whichever of the 64 x 128 tiles and the ring fills its waves more.
constexpr FusedKernel DispatchTilesPastOneWave(int heads, int rows, long long sms,
                                               WeightType weight) {
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  const long long tiles_128 = heads * ((rows + 127LL) / 128);
  if (2 * tiles_64 <= 3 * sms) return FusedKernel::kTile64x64Pipeline4;
  const bool as_full_as_64_row_tiles = tiles_64 == 2 * tiles_128;
  // Whether a head's 128-row tiles are at least num/100 full.
  const auto full_128 = [rows](int num) {
    return 100LL * rows >= num * 128LL * ((rows + 127) / 128);
  };
  const bool persistent = weight == WeightType::kE4m3
                              ? (tiles_128 > sms && (as_full_as_64_row_tiles || full_128(85) ||
                                                     FillsWaves(tiles_128, sms, 3, 4))) ||
                                    (as_full_as_64_row_tiles && FillsWaves(tiles_128, sms, 9, 10))
                              : (as_full_as_64_row_tiles && FillsWaves(tiles_128, sms, 3, 4)) ||
                                    (full_128(60) && FillsWaves(tiles_128, sms, 4, 5));
  if (persistent) return FusedKernel::kPersistent128x128;
  return FillsWavesMore(tiles_64, 2 * sms, 2 * tiles_64, 3 * sms)
             ? FusedKernel::kTile64x128
             : FusedKernel::kTile64x64Pipeline4;
}

// The tiles of small grids, in every rule (T: 64-row tiles; kAuto past them): the 64 x 32 tiles
// to T = 24 with the bf16 output, below 16 with the e4m3 output (whose amax exchange costs a head
// split over four blocks more), then the all-in-flight 64 x 64 tiles below 48. With e4m3 W_UV
// and the bf16 output, where two warpgroups convert it in the 64 x 32 tiles, those tiles while
// their blocks make one wave at two an SM (4T <= 2 SMs), from 256 rows to three quarters of it
// (T <= 49 on 132 SMs: 16 x 256, 5.50 us in the 6-stage ring against 5.68; 8 x 384, 4.46 in
// the tiles against 4.96).
constexpr FusedKernel SmallGridTiles(int heads, int rows, long long sms, WeightType weight,
                                     OutputType output) {
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  if (weight == WeightType::kE4m3 && output == OutputType::kBf16) {
    return 4 * tiles_64 <= 2 * sms && (rows < 256 || 8 * tiles_64 <= 3 * sms)
               ? FusedKernel::kTile64x32AllSteps
               : FusedKernel::kAuto;
  }
  if (output == OutputType::kBf16 ? 4 * tiles_64 <= 96 : tiles_64 < 16) {
    return FusedKernel::kTile64x32AllSteps;
  }
  return 2 * tiles_64 < 96 ? FusedKernel::kTile64x64AllSteps : FusedKernel::kAuto;
}

// e4m3 W_UV's tiles, once the register kernels are passed: the small grids' (above); within one
// wave of 64-row tiles (T <= SMs) the 64 x 128 tiles from 0.8 SMs of them, else the 6-stage
// ring; past it by waves (docs/design.md, "The dispatch rule").
constexpr FusedKernel DispatchE4m3Tiles(int heads, int rows, long long sms, OutputType output) {
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  if (const FusedKernel small = SmallGridTiles(heads, rows, sms, WeightType::kE4m3, output);
      small != FusedKernel::kAuto) {
    return small;
  }
  if (tiles_64 <= sms) {
    return 5 * tiles_64 > 4 * sms ? FusedKernel::kTile64x128 : FusedKernel::kTile64x64Pipeline6;
  }
  return DispatchTilesPastOneWave(heads, rows, sms, WeightType::kE4m3);
}

// The rule for the e4m3 output. A head split over blocks exchanges its amax through a cluster
// (ColumnSplit, LatentSplit, the 64 x 32 and 64 x 64 tiles). Drawn from the grid with every kernel
// forced on it (bf16 and e4m3 W_UV): the register kernels lead at few rows (with bf16 W_UV
// ColumnSplit to 8 rows at up to 64 heads, 4 at 96, 16 at 16 and 32 at 8; with e4m3 W_UV
// LatentSplit to 16 rows at up to 16 heads, then ColumnSplit to 8 rows, and to 16 from 48 heads).
// Past them the tiles of the bf16 output's rules, which every kernel forced between the grid's
// shapes measured closer to the fastest than the grid's thresholds: e4m3 W_UV's
// (DispatchE4m3Tiles), and with bf16 W_UV the tiles by waves past one wave of 64-row tiles
// (DispatchTilesPastOneWave). Within one wave, with bf16 W_UV, the grid's: the 64 x 32 tiles below
// 16 of them, the 64 x 64 tiles (their exchange between two blocks) below 48, then the 6-stage ring
// to 64 tiles (and to 32 rows below 128 heads), else the 64 x 128 tiles, which hold whole heads.
constexpr FusedKernel DispatchE4m3OutputKernel(int heads, int rows, int multiprocessors,
                                               WeightType weight) {
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  const long long sms = multiprocessors;
  if (weight == WeightType::kE4m3) {
    if (rows <= 16 && heads <= 16) return FusedKernel::kLatentSplit;
    if (rows <= 8 || (rows <= 16 && heads >= 48)) return FusedKernel::kColumnSplit;
  } else if ((rows <= 8 && heads <= 64) || (rows <= 4 && heads <= 96) ||
             (rows <= 16 && heads <= 16) || (rows <= 32 && heads <= 8)) {
    return FusedKernel::kColumnSplit;
  }
  if (weight == WeightType::kE4m3) return DispatchE4m3Tiles(heads, rows, sms, OutputType::kE4m3);
  if (tiles_64 > sms) return DispatchTilesPastOneWave(heads, rows, sms, weight);
  if (tiles_64 >= 48) {
    return tiles_64 <= 64 || (rows <= 32 && heads < 128) ? FusedKernel::kTile64x64Pipeline6
                                                         : FusedKernel::kTile64x128;
  }
  return SmallGridTiles(heads, rows, sms, weight, OutputType::kE4m3);  // T < 48 here
}

}  // namespace dispatch_internal

// The rule, for a GPU with `multiprocessors` SMs (measured on H200s, 132). T counts 64-row
// tiles; the tile-count thresholds (96) are measured crossovers, not SM counts. e4m3 W_UV
// has a rule of its own, drawn from the grid with every kernel forced on e4m3 weights: the
// kernels that convert W_UV in registers (ColumnSplit, LatentSplit) lead further, and the
// tiles that convert it in shared memory lead later; so has the e4m3 output (above)
// (docs/design.md, "The dispatch rule").
constexpr FusedKernel DispatchFusedKernel(int heads, int rows, int multiprocessors,
                                          WeightType weight = WeightType::kBf16,
                                          OutputType output = OutputType::kBf16) {
  // The rule's domain: shapes ValidateShape accepts on a GPU with at least one SM. Values
  // outside it are clamped into it, so that no arithmetic below overflows or divides by zero.
  heads = heads < 1 ? 1 : heads > kMaxHeads ? kMaxHeads : heads;
  rows = rows < 1 ? 1 : rows > kMaxRows ? kMaxRows : rows;
  multiprocessors = multiprocessors < 1 ? 1 : multiprocessors;
  if (output == OutputType::kE4m3) {
    return dispatch_internal::DispatchE4m3OutputKernel(heads, rows, multiprocessors, weight);
  }
  const long long work = static_cast<long long>(heads) * rows;
  const long long tiles_64 = heads * ((rows + 63LL) / 64);
  const long long sms = multiprocessors;
  // The latent axis over a block's warps, up to 32 rows while its blocks fit one an SM.
  if (rows <= 32 && dispatch_internal::LatentSplitBlocksFitOneWave(heads, rows, multiprocessors)) {
    return FusedKernel::kLatentSplit;
  }
  if (weight == WeightType::kE4m3) {
    // Past one wave LatentSplit still leads at up to 8 heads to 32 rows, 32 heads to 16 rows and
    // 33-40 heads at 9-16 rows (its 16-row blocks); ColumnSplit at 33-40 heads to 8 rows and
    // from 41 heads to 16. From 17 rows the 64 x 32 tiles lead (SmallGridTiles), as far as one
    // wave of them.
    if ((rows <= 32 && heads <= 8) || (rows <= 16 && heads <= 32) ||
        (rows > 8 && rows <= 16 && heads <= 40)) {
      return FusedKernel::kLatentSplit;
    }
    if (rows <= 16) return FusedKernel::kColumnSplit;
    return dispatch_internal::DispatchE4m3Tiles(heads, rows, sms, OutputType::kBf16);
  }
  // Past one wave LatentSplit still leads up to 8 rows at up to 64 heads, back to back and after
  // an attention-like upstream kernel, with PDL and without (only behind an upstream kernel that
  // holds no shared memory, with PDL, do ColumnSplit's blocks start earlier); but from 49 heads at
  // 1-2 rows ColumnSplit's 8-row blocks lead back to back and after the upstream kernels. Its
  // 16-row blocks lead at 9-16 rows up to 48 heads, gated and without a gate, back to back and
  // after the upstream kernel with PDL (without PDL within 2%); at 49-64 heads ColumnSplit adds
  // less without PDL and as little with it.
  if (rows <= 8 && heads <= 64 && !(rows <= 2 && heads > 48)) return FusedKernel::kLatentSplit;
  if (rows <= 16 && heads <= 48) return FusedKernel::kLatentSplit;
  if (rows <= 16 && (heads <= 64 || work <= 768)) return FusedKernel::kColumnSplit;
  if (dispatch_internal::EightRowBlocksFitOneWave(heads, rows, multiprocessors))
    return FusedKernel::kColumnSplit;
  if (const FusedKernel small =
          dispatch_internal::SmallGridTiles(heads, rows, sms, weight, OutputType::kBf16);
      small != FusedKernel::kAuto) {
    return small;
  }
  // Within one wave of 64-row tiles, the 64 x 128 tiles (each latent row read once) from 64 rows
  // at 0.9 SMs of them, and from 128 rows once they outnumber half the SMs; else the 6-stage
  // ring, which after an attention-like upstream kernel adds less at 32-64 rows (128 x 32: 5.13
  // against 5.94 us) though back to back it is up to 9% slower there.
  if (tiles_64 <= sms) {
    return (rows >= 64 && 10 * tiles_64 > 9 * sms) || (rows >= 128 && 2 * tiles_64 > sms)
               ? FusedKernel::kTile64x128
               : FusedKernel::kTile64x64Pipeline6;
  }
  return dispatch_internal::DispatchTilesPastOneWave(heads, rows, sms, weight);
}

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_DISPATCH_H_

// Which fused kernel runs: the one place that maps MlaValueVariant and a shape to a kernel, for
// the launch and for graph/, which finds the captured node by the kernel's address.

#include <cuda_runtime.h>

#include "mla/kernels/mla_value_variants.h"
#include "mla/kernels/params.h"

namespace mla {

const char* MlaValueVariantName(MlaValueVariant variant) {
  switch (variant) {
    case MlaValueVariant::kAuto:
      return "auto";
    case MlaValueVariant::kColumnSplit:
      return "split";
    case MlaValueVariant::kTile:
      return "tile";
    case MlaValueVariant::kTile128:
      return "tile128";
    case MlaValueVariant::kTile64:
      return "tile64";
  }
  return "?";
}

MlaValueVariant ResolveMlaValueVariant(MlaValueVariant variant, int heads, int rows) {
  // Provisional, not measured: a guess until tail_bench's fused-split and fused-tile* modes
  // have been run on the H200. The tile kernel needs a full 64-row tile to pay off; below about
  // one block per multiprocessor (132 on an H200), 64-column blocks double the grid.
  if (variant == MlaValueVariant::kAuto) {
    variant = rows >= 64 ? MlaValueVariant::kTile : MlaValueVariant::kColumnSplit;
  }
  if (variant == MlaValueVariant::kTile) {
    const int row_tiles = (rows + 63) / 64;
    variant = heads * row_tiles < 132 ? MlaValueVariant::kTile64 : MlaValueVariant::kTile128;
  }
  return variant;
}

const void* MlaValueKernelAddress(int heads, int rows, MlaValueVariant variant) {
  switch (ResolveMlaValueVariant(variant, heads, rows)) {
    case MlaValueVariant::kTile128:
      return MlaValueTileKernelAddress(128);
    case MlaValueVariant::kTile64:
      return MlaValueTileKernelAddress(64);
    default:
      return MlaValueColumnSplitKernelAddress(heads, rows);
  }
}

cudaError_t LaunchMlaValue(const MlaValueParams& p, cudaStream_t stream, bool pdl,
                           MlaValueVariant variant) {
  switch (ResolveMlaValueVariant(variant, p.heads, p.rows)) {
    case MlaValueVariant::kTile128:
      return LaunchMlaValueTile(p, stream, pdl, 128);
    case MlaValueVariant::kTile64:
      return LaunchMlaValueTile(p, stream, pdl, 64);
    default:
      return LaunchMlaValueColumnSplit(p, stream, pdl);
  }
}

}  // namespace mla

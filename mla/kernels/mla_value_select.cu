// Which fused kernel runs: the one place that maps MlaValueVariant and a shape to a kernel, for
// the launch and for graph/, which finds the captured node by the kernel's address.

#include <cuda_runtime.h>

#include "mla/dispatch.h"
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
    case MlaValueVariant::kWgmmaP4:
      return "wgmma-p4";
    case MlaValueVariant::kWgmmaK2:
      return "wgmma-k2";
    case MlaValueVariant::kWgmmaA8:
      return "wgmma-a8";
    case MlaValueVariant::kWgmmaN128P3:
      return "wgmma-n128-p3";
    case MlaValueVariant::kWgmmaN128A8:
      return "wgmma-n128-a8";
    case MlaValueVariant::kWgmmaM128P2:
      return "wgmma-m128-p2";
    case MlaValueVariant::kWgmmaM128P4:
      return "wgmma-m128-p4";
    case MlaValueVariant::kWgmmaM128Persistent:
      return "wgmma-m128-ps";
    case MlaValueVariant::kWgmmaM128Ps4:
      return "wgmma-m128-ps4";
    case MlaValueVariant::kWgmmaM128Ps5:
      return "wgmma-m128-ps5";
  }
  return "?";
}

MlaValueVariant ResolveMlaValueVariant(MlaValueVariant variant, int heads, int rows) {
  // The measured rule (mla/dispatch.h). Where it picks the BMM path but the caller forces the
  // fused one: the pipelined MlaValueWgmma, the fastest fused kernel at both such measured shapes
  // (128 x 512 and 128 x 1024 rows; the 128-column tile is 4% and 11% behind).
  if (variant == MlaValueVariant::kAuto) {
    switch (DispatchTail(heads, rows)) {
      case TailKernel::kColumnSplit:
        return MlaValueVariant::kColumnSplit;
      case TailKernel::kWgmmaK2:
        return MlaValueVariant::kWgmmaK2;
      case TailKernel::kWgmmaA8:
        return MlaValueVariant::kWgmmaA8;
      case TailKernel::kWgmmaP4:
        return MlaValueVariant::kWgmmaP4;
      case TailKernel::kTile64:
        return MlaValueVariant::kTile64;
      case TailKernel::kTile128:
        return MlaValueVariant::kTile128;
      default:
        return MlaValueVariant::kWgmmaP4;
    }
  }
  if (variant == MlaValueVariant::kTile) {
    return static_cast<long long>(heads) * rows <= 8192 ? MlaValueVariant::kTile64
                                                         : MlaValueVariant::kTile128;
  }
  return variant;
}

const void* MlaValueKernelAddress(int heads, int rows, MlaValueVariant variant) {
  const MlaValueVariant resolved = ResolveMlaValueVariant(variant, heads, rows);
  if (IsMlaValueWgmma(resolved)) return MlaValueWgmmaKernelAddress(resolved);
  switch (resolved) {
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
  const MlaValueVariant resolved = ResolveMlaValueVariant(variant, p.heads, p.rows);
  if (IsMlaValueWgmma(resolved)) return LaunchMlaValueWgmma(p, stream, pdl, resolved);
  switch (resolved) {
    case MlaValueVariant::kTile128:
      return LaunchMlaValueTile(p, stream, pdl, 128);
    case MlaValueVariant::kTile64:
      return LaunchMlaValueTile(p, stream, pdl, 64);
    default:
      return LaunchMlaValueColumnSplit(p, stream, pdl);
  }
}

cudaError_t PrepareMlaValueKernels() {
  const cudaError_t tile = PrepareMlaValueTile();
  return tile != cudaSuccess ? tile : PrepareMlaValueWgmma();
}

}  // namespace mla

// Which fused kernel runs: the one place that maps MlaValueVariant and a shape to a kernel, for
// the launch and for graph/, which finds the captured node by the kernel's address; and the one
// place that loads every kernel of the tail.

#include <cuda_runtime.h>

#include <initializer_list>

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
    case MlaValueVariant::kWgmmaP4:
      return "wgmma-p4";
    case MlaValueVariant::kWgmmaA8:
      return "wgmma-a8";
    case MlaValueVariant::kWgmmaN128:
      return "wgmma-n128";
    case MlaValueVariant::kWgmmaA8N32:
      return "wgmma-a8n32";
    case MlaValueVariant::kWgmmaP6:
      return "wgmma-p6";
    case MlaValueVariant::kWgmmaWs:
      return "wgmma-ws";
  }
  return "?";
}

MlaValueVariant ResolveMlaValueVariant(MlaValueVariant variant, int heads, int rows) {
  if (variant != MlaValueVariant::kAuto) return variant;
  switch (DispatchTail(heads, rows)) {
    case TailKernel::kColumnSplit:
      return MlaValueVariant::kColumnSplit;
    case TailKernel::kWgmmaA8N32:
      return MlaValueVariant::kWgmmaA8N32;
    case TailKernel::kWgmmaA8:
      return MlaValueVariant::kWgmmaA8;
    case TailKernel::kWgmmaP6:
      return MlaValueVariant::kWgmmaP6;
    case TailKernel::kWgmmaP4:
      return MlaValueVariant::kWgmmaP4;
    case TailKernel::kWgmmaN128:
      return MlaValueVariant::kWgmmaN128;
    case TailKernel::kWgmmaWs:
      return MlaValueVariant::kWgmmaWs;
  }
  return MlaValueVariant::kWgmmaP4;
}

const void* MlaValueKernelAddress(int heads, int rows, MlaValueVariant variant) {
  const MlaValueVariant resolved = ResolveMlaValueVariant(variant, heads, rows);
  if (resolved == MlaValueVariant::kWgmmaWs) return MlaValueWsKernelAddress(heads, rows);
  if (IsMlaValueWgmma(resolved)) return MlaValueWgmmaKernelAddress(resolved);
  return MlaValueColumnSplitKernelAddress(heads, rows);
}

cudaError_t LaunchMlaValue(const MlaValueParams& p, cudaStream_t stream, bool pdl,
                           MlaValueVariant variant) {
  const MlaValueVariant resolved = ResolveMlaValueVariant(variant, p.heads, p.rows);
  if (resolved == MlaValueVariant::kWgmmaWs) return LaunchMlaValueWs(p, stream, pdl);
  if (IsMlaValueWgmma(resolved)) return LaunchMlaValueWgmma(p, stream, pdl, resolved);
  return LaunchMlaValueColumnSplit(p, stream, pdl);
}

cudaError_t PrepareTailKernels() {
  for (cudaError_t (*prepare)() : {PrepareMlaValueColumnSplit, PrepareMlaValueWgmma,
                                   PrepareMlaValueWs, PrepareMlaGate, PrepareBmmPointers}) {
    const cudaError_t e = prepare();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace mla

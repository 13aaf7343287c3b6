#ifndef MLA_KERNELS_MLA_VALUE_VARIANTS_H_
#define MLA_KERNELS_MLA_VALUE_VARIANTS_H_

// The fused kernels' own entry points, behind LaunchMlaValue, MlaValueKernelAddress and
// PrepareTailKernels (params.h), which pick one by MlaValueVariant or load them all. Each
// Prepare* loads its kernels (LoadKernel, launch.cuh).

#include <cuda_runtime_api.h>

#include "mla/kernels/params.h"

namespace mla {

// MlaValue (mla_value.cu): MlaValueBlockRows(heads, rows) rows a block.
cudaError_t LaunchMlaValueColumnSplit(const MlaValueParams& params, cudaStream_t stream, bool pdl);
cudaError_t PrepareMlaValueColumnSplit();
const void* MlaValueColumnSplitKernelAddress(int heads, int rows);

// MlaValueWgmma (mla_value_wgmma.cu) in the configuration a kWgmma* variant names;
// IsMlaValueWgmma tells which variants those are.
bool IsMlaValueWgmma(MlaValueVariant variant);
cudaError_t LaunchMlaValueWgmma(const MlaValueParams& params, cudaStream_t stream, bool pdl,
                                MlaValueVariant variant);
const void* MlaValueWgmmaKernelAddress(MlaValueVariant variant);
cudaError_t PrepareMlaValueWgmma();

// The warp-specialized persistent kernel (mla_value_ws.cu): kWgmmaWs. Its address depends on the
// shape (with one tile a block, the kernel with early sigmoids); null if the device's
// multiprocessor count cannot be read.
cudaError_t LaunchMlaValueWs(const MlaValueParams& params, cudaStream_t stream, bool pdl);
const void* MlaValueWsKernelAddress(int heads, int rows);
cudaError_t PrepareMlaValueWs();

}  // namespace mla

#endif  // MLA_KERNELS_MLA_VALUE_VARIANTS_H_

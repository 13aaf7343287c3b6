#ifndef MLA_KERNELS_MLA_VALUE_VARIANTS_H_
#define MLA_KERNELS_MLA_VALUE_VARIANTS_H_

// The fused kernels' own launch plans and loaders, behind PlanMlaValue and PrepareTailKernels
// (params.h), which pick one by FusedKernel or load them all.

#include <cuda_runtime_api.h>

#include "mla_tail/mla/dispatch.h"
#include "mla/kernels/params.h"

namespace mla {

// MlaValue (mla_value.cu): MlaValueBlockRows rows a block.
KernelLaunch PlanMlaValueColumnSplit(int heads, int rows, int multiprocessors);
cudaError_t PrepareMlaValueColumnSplit();

// MlaValueKSplit (mla_value_ksplit.cu): 8-row blocks of 8 warps up to 8 rows, else 16-row
// blocks of 4.
KernelLaunch PlanMlaValueKSplit(int heads, int rows);
cudaError_t PrepareMlaValueKSplit();

// MlaValueWgmma (mla_value_wgmma.cu) in the configuration a kTile* kernel names;
// cudaErrorInvalidValue for any other kernel. IsMlaValueWgmma tells which kernels those are.
bool IsMlaValueWgmma(FusedKernel kernel);
cudaError_t PlanMlaValueWgmma(int heads, int rows, FusedKernel kernel, KernelLaunch* launch);
cudaError_t PrepareMlaValueWgmma();

// MlaValueWgmma-ws (mla_value_ws.cu): kPersistent128x128.
KernelLaunch PlanMlaValueWs(int heads, int rows, int multiprocessors);
cudaError_t PrepareMlaValueWs();

}  // namespace mla

#endif  // MLA_KERNELS_MLA_VALUE_VARIANTS_H_

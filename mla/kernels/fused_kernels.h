#ifndef MLA_TAIL_MLA_KERNELS_FUSED_KERNELS_H_
#define MLA_TAIL_MLA_KERNELS_FUSED_KERNELS_H_

// The fused kernels' own launch plans and loaders, behind PlanFusedKernel and LoadTailKernels
// (launch.h), which pick one by FusedKernel or load them all.

#include <cuda_runtime_api.h>

#include "mla/kernels/launch.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {

// ColumnSplit (column_split.cu): ColumnSplitBlockRows rows a block.
KernelLaunch PlanColumnSplit(int heads, int rows, int multiprocessors);
cudaError_t LoadColumnSplit();

// LatentSplit (latent_split.cu): 8-row blocks of 8 warps up to 8 rows, else 16-row
// blocks of 4.
KernelLaunch PlanLatentSplit(int heads, int rows);
cudaError_t LoadLatentSplit();

// Tile (tile.cu) in the configuration a kTile* kernel names;
// cudaErrorInvalidValue for any other kernel. IsTileKernel tells which kernels those are.
bool IsTileKernel(FusedKernel kernel);
cudaError_t PlanTile(int heads, int rows, FusedKernel kernel, KernelLaunch* launch);
cudaError_t LoadTileKernels();

// Persistent128x128 (persistent_128x128.cu): kPersistent128x128.
KernelLaunch PlanPersistent128x128(int heads, int rows, int multiprocessors);
cudaError_t LoadPersistent128x128();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_KERNELS_FUSED_KERNELS_H_

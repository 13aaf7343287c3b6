#ifndef MLA_TAIL_MLA_KERNELS_FUSED_KERNELS_H_
#define MLA_TAIL_MLA_KERNELS_FUSED_KERNELS_H_

// The fused kernels' own launch plans and loaders, behind PlanFusedKernel and LoadTailKernels
// (launch.h), which pick one by FusedKernel and weight type or load them all. Each plan is a
// template of the weight and output types (instantiated for every pair in its kernel's file);
// PlanFusedKernel turns the buffers' types into those template arguments (WithTypes), in one
// place.

#include <cuda_runtime_api.h>

#include <type_traits>

#include "mla/kernels/launch.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {

template <WeightType kW>
using WeightTag = std::integral_constant<WeightType, kW>;

// f(WeightTag<w>{}): the weight type as a template argument (f's parameter's ::value).
template <typename F>
decltype(auto) WithWeightType(WeightType w, F&& f) {
  if (w == WeightType::kE4m3) return f(WeightTag<WeightType::kE4m3>{});
  return f(WeightTag<WeightType::kBf16>{});
}

template <OutputType kO>
using OutputTag = std::integral_constant<OutputType, kO>;

// f(WeightTag<w>{}, OutputTag<o>{}): both types as template arguments.
template <typename F>
decltype(auto) WithTypes(WeightType w, OutputType o, F&& f) {
  return WithWeightType(w, [&](auto weight) {
    if (o == OutputType::kE4m3) return f(weight, OutputTag<OutputType::kE4m3>{});
    return f(weight, OutputTag<OutputType::kBf16>{});
  });
}

// f(WeightTag<w>{}) for every weight type (loading every instantiation).
template <typename F>
void ForEachWeightType(F&& f) {
  f(WeightTag<WeightType::kBf16>{});
  f(WeightTag<WeightType::kE4m3>{});
}

// f(WeightTag<w>{}, OutputTag<o>{}) for every pair of types.
template <typename F>
void ForEachTypes(F&& f) {
  ForEachWeightType([&](auto w) {
    f(w, OutputTag<OutputType::kBf16>{});
    f(w, OutputTag<OutputType::kE4m3>{});
  });
}

// Each kernel in two forms: with the gate (`gated`), and without (out = bf16(v), no gate loads);
// each plan a template of the weight and output types.

// ColumnSplit (column_split.cu): ColumnSplitBlockRows rows a block.
template <WeightType kW, OutputType kO>
KernelLaunch PlanColumnSplit(int heads, int rows, int multiprocessors, bool gated);
cudaError_t LoadColumnSplit();

// LatentSplit (latent_split.cu): 8-row blocks of 8 warps up to 8 rows, else 16-row
// blocks of 4.
template <WeightType kW, OutputType kO>
KernelLaunch PlanLatentSplit(int heads, int rows, bool gated);
cudaError_t LoadLatentSplit();

// Tile (tile.cu) in the configuration a kTile* kernel names;
// cudaErrorInvalidValue for any other kernel. IsTileKernel tells which kernels those are.
bool IsTileKernel(FusedKernel kernel);
template <WeightType kW, OutputType kO>
cudaError_t PlanTile(int heads, int rows, FusedKernel kernel, bool gated, KernelLaunch* launch);
cudaError_t LoadTileKernels();

// Persistent128x128 (persistent_128x128.cu): kPersistent128x128.
template <WeightType kW, OutputType kO>
KernelLaunch PlanPersistent128x128(int heads, int rows, int multiprocessors, bool gated);
cudaError_t LoadPersistent128x128();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_KERNELS_FUSED_KERNELS_H_

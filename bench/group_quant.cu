#include <cuda_runtime.h>

#include "bench/group_quant.h"
#include "mla/kernels/device.cuh"
#include "mla/kernels/fp8.cuh"
#include "mla/kernels/launch.h"

namespace mla_tail_bench {
namespace {

constexpr int kThreads = 128;
constexpr int kLanesPerGroup = 16;  // 128 values, 8 a lane
constexpr int kGroupsPerBlock = kThreads / kLanesPerGroup;

__global__ void __launch_bounds__(kThreads) GroupQuantKernel(const GroupQuantParams p) {
  const int group = blockIdx.x * kGroupsPerBlock + threadIdx.x / kLanesPerGroup;
  const int lane = threadIdx.x % kLanesPerGroup;
  const int t = min(group / p.heads, p.rows - 1);  // past the end: the last row, not stored
  const int h = group % p.heads;
  mla_tail::internal::device::GridDependencyWait();
  const uint4 x = *reinterpret_cast<const uint4*>(p.input + t * p.input_row_stride +
                                                  h * mla_tail::kValueDim + 8 * lane);
  mla_tail::internal::device::LaunchDependents();
  const mla_tail::internal::device::OutputScale scale = mla_tail::internal::device::OutputScaleOf(
      mla_tail::internal::device::GroupMax<kLanesPerGroup>(
          mla_tail::internal::device::Bf16x8MagnitudeMax(x)));
  const uint2 q = mla_tail::internal::device::QuantizeBf16x8(x, scale);
  if (group >= p.rows * p.heads) return;
  *reinterpret_cast<uint2*>(p.output + t * p.output_row_stride + h * mla_tail::kValueDim +
                            8 * lane) = q;
  if (lane == 0) p.scales[t * p.scale_row_stride + h] = scale.scale;
}

}  // namespace

cudaError_t LaunchGroupQuant(const GroupQuantParams& p, cudaStream_t stream, bool pdl) {
  const int groups = p.rows * p.heads;
  return mla_tail::internal::LaunchWithPdl(GroupQuantKernel,
                                           dim3((groups + kGroupsPerBlock - 1) / kGroupsPerBlock),
                                           dim3(kThreads), 0, stream, pdl, p);
}

}  // namespace mla_tail_bench

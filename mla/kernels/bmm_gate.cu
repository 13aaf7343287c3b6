// BmmGateKernel: output = active ? bf16(values * sigmoid(gate)) : +0 (without a gate:
// active ? bf16(values) : +0), for the batched GEMM's values. One 256-thread block per (16 rows,
// head); each thread 8 columns of one row, 16-byte accesses.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"

namespace mla_tail::internal {
namespace {

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 16;
constexpr int kThreadsPerRow = kValueDim / 8;

// kGated false: out = bf16(values), no gate loads (the operands' gate is null).
template <bool kGated>
__global__ void __launch_bounds__(kThreads) BmmGateKernel(const BmmGateParams p) {
  const int head = blockIdx.y;
  const int t = blockIdx.x * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  const int d = (threadIdx.x % kThreadsPerRow) * 8;

  // Everything this kernel reads may be written upstream (values by the GEMM, the operands by
  // BmmPointersKernel).
  device::GridDependencyWait();
  device::LaunchDependents();
  if (t >= p.rows) return;
  const GateOperands ops = *p.operands;
  // Rows at and past the live count: the GEMM computed them into scratch; nothing of theirs is
  // read here or written.
  if (t >= device::LiveRows(ops.row_count, p.rows)) return;

  const int column = head * kValueDim + d;
  const uint4 values = *reinterpret_cast<const uint4*>(
      p.values + (static_cast<int64_t>(head) * p.rows + t) * kValueDim + d);
  uint4 gate = make_uint4(0, 0, 0, 0);
  if constexpr (kGated) {
    gate = *reinterpret_cast<const uint4*>(ops.gate + t * ops.gate_row_stride + column);
  }
  const bool active = ops.lengths[t / p.q] > 0;

  const uint32_t* value_words = &values.x;
  const uint32_t gates[4] = {gate.x, gate.y, gate.z, gate.w};
  const bool actives[4] = {active, active, active, active};
  float v[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = device::Bf16x2ToFloat2(value_words[i]);
    v[2 * i] = pair.x;
    v[2 * i + 1] = pair.y;
  }
  uint32_t out[4];
  device::EpiloguePairs<kGated>(v, gates, actives, out);
  *reinterpret_cast<uint4*>(ops.output + t * ops.output_row_stride + column) =
      make_uint4(out[0], out[1], out[2], out[3]);
}

}  // namespace

cudaError_t LoadBmmGate() {
  const cudaError_t e = LoadKernel(BmmGateKernel<true>, 0);
  return e != cudaSuccess ? e : LoadKernel(BmmGateKernel<false>, 0);
}

KernelLaunch PlanBmmGate(int heads, int rows, bool gated) {
  KernelLaunch launch;
  launch.function = gated ? reinterpret_cast<const void*>(BmmGateKernel<true>)
                          : reinterpret_cast<const void*>(BmmGateKernel<false>);
  launch.grid = dim3((rows + kRowsPerBlock - 1) / kRowsPerBlock, heads);
  launch.block = dim3(kThreads);
  return launch;
}

}  // namespace mla_tail::internal

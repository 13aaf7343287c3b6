// The peer's gate kernel (bench/peer.h): one 256-thread block per (16 rows, head), each thread 8
// columns of one row with 16-byte accesses, the sigmoid as the contract writes it
// (1 / (1 + exp(-g)), FP32).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "bench/peer_gate.h"
#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.h"

namespace mla_tail_bench {
namespace {

using mla_tail::bf16;

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = 16;
constexpr int kThreadsPerRow = mla_tail::kValueDim / 8;

struct PeerGateParams {
  const bf16* values;  // [H, B, 128]: head h, row t at values + (h * B + t) * 128
  const bf16* gate;    // [B, H * 128]
  int64_t gate_row_stride;
  const int32_t* lengths;  // [B / q]
  bf16* output;            // [B, H * 128]
  int64_t output_row_stride;
  int rows;  // B
  int q;
};

__global__ void __launch_bounds__(kThreads) PeerGateKernel(const PeerGateParams p) {
  const int head = blockIdx.y;
  const int t = blockIdx.x * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  const int d = (threadIdx.x % kThreadsPerRow) * 8;
  mla_tail::internal::device::GridDependencyWait();  // the values are the GEMM's
  mla_tail::internal::device::LaunchDependents();
  if (t >= p.rows) return;
  const int column = head * mla_tail::kValueDim + d;
  const uint4 values = *reinterpret_cast<const uint4*>(
      p.values + (static_cast<int64_t>(head) * p.rows + t) * mla_tail::kValueDim + d);
  const uint4 gate = *reinterpret_cast<const uint4*>(p.gate + t * p.gate_row_stride + column);
  const bool active = p.lengths[t / p.q] > 0;
  const bf16* v = reinterpret_cast<const bf16*>(&values);
  const bf16* g = reinterpret_cast<const bf16*>(&gate);
  uint4 out;
  bf16* o = reinterpret_cast<bf16*>(&out);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float s = 1.0f / (1.0f + expf(-__bfloat162float(g[i])));
    o[i] = active ? __float2bfloat16_rn(__bfloat162float(v[i]) * s) : __float2bfloat16_rn(0.0f);
  }
  *reinterpret_cast<uint4*>(p.output + t * p.output_row_stride + column) = out;
}

}  // namespace

cudaError_t LaunchPeerGate(const bf16* values, const mla_tail::TailShape& shape,
                           const mla_tail::TailBuffers& b, cudaStream_t stream) {
  const PeerGateParams params{values,     b.gate,   b.gate_row_stride,
                              b.lengths,  b.output, b.output_row_stride,
                              shape.rows, shape.q};
  const dim3 grid((shape.rows + kRowsPerBlock - 1) / kRowsPerBlock, shape.heads);
  return mla_tail::internal::LaunchWithPdl(PeerGateKernel, grid, dim3(kThreads), 0, stream,
                                           /*pdl=*/true, params);
}

}  // namespace mla_tail_bench

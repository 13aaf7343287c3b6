#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "mla/kernels/device.cuh"
#include "testing/support/gate_math.h"

namespace mla_tail_testing {
namespace {

// v values (bf16 bit patterns): ordinary, large, tiny, subnormal, signed zeros, NaN.
constexpr int kValueCount = 11;
__constant__ uint16_t kValueBits[kValueCount] = {0x3F80, 0xC060, 0x3C00, 0x4480, 0xC77F, 0x7F61,
                                                 0x0DA2, 0x8000, 0x0000, 0x0001, 0x7FC0};
__device__ float Value(int i) { return __uint_as_float(uint32_t{kValueBits[i]} << 16); }

__global__ void GateMathKernel(unsigned long long* counters, unsigned* first_mismatch) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;  // gate bits x value x active
  const uint32_t gate = static_cast<uint32_t>(index) & 0xFFFFu;
  const int value = (index >> 16) % kValueCount;
  const bool active = ((index >> 16) / kValueCount) != 0;
  if ((index >> 16) >= 2 * kValueCount) return;
  const float v0 = Value(value);
  const float v1 = -Value((value + 3) % kValueCount);
  // Both halves carry the gate under test, the second with its sign flipped.
  const uint32_t word = gate | ((gate ^ 0x8000u) << 16);

  const uint32_t exact = mla_tail::internal::device::GatePair(v0, v1, word, active);
  bool in_range = true;
  const uint32_t fast = mla_tail::internal::device::GatePairInRange(v0, v1, word, active, in_range);
  float vs[2] = {v0, v1};
  const uint32_t gates[1] = {word};
  const bool actives[1] = {active};
  uint32_t both[1];
  mla_tail::internal::device::GatePairs<1>(vs, gates, actives, both);

  // The sigmoids first, then the gate (Tile's early sigmoids): the branch-free ones
  // where they keep in_range; the general ones, which a thread falls back to for all its pairs,
  // everywhere.
  bool sigmoid_in_range = true;
  const float2 s = mla_tail::internal::device::SigmoidPairInRange(word, active, sigmoid_in_range);
  const uint32_t general = mla_tail::internal::device::GateWithSigmoid(
      v0, v1, mla_tail::internal::device::SigmoidPair(word), active);
  const uint32_t sigmoid_first =
      sigmoid_in_range ? mla_tail::internal::device::GateWithSigmoid(v0, v1, s, active) : general;

  atomicAdd(&counters[0], 1ull);
  bool mismatch = false;
  if (sigmoid_first != exact || general != exact || sigmoid_in_range != in_range) {
    atomicAdd(&counters[5], 1ull);
    mismatch = true;
  }
  if (in_range && fast != exact) {
    atomicAdd(&counters[1], 1ull);
    mismatch = true;
  }
  if (both[0] != exact) {
    atomicAdd(&counters[2], 1ull);
    mismatch = true;
  }
  if (!in_range) {
    atomicAdd(&counters[3], 1ull);
    const float g0 = __uint_as_float(gate << 16);
    const float g1 = __uint_as_float((gate ^ 0x8000u) << 16);
    if (fminf(g0, g1) >= -87.0f) atomicAdd(&counters[4], 1ull);
  }
  if (mismatch) atomicCAS(first_mismatch, 0xFFFFFFFFu, gate);
}

__global__ void SigmoidKernel(float* sigmoids) {
  const uint32_t gate = blockIdx.x * blockDim.x + threadIdx.x;
  if (gate > 0xFFFFu) return;
  sigmoids[gate] = mla_tail::internal::device::SigmoidPair(gate | (gate << 16)).x;
}

__global__ void GateOutputsKernel(const uint16_t* values, int64_t values_stride,
                                  const uint16_t* gate, int64_t gate_stride, const int32_t* lengths,
                                  int q, int rows, int pairs, uint16_t* out, int64_t out_stride) {
  const int64_t index = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (index >= int64_t{rows} * pairs) return;
  const int t = static_cast<int>(index / pairs);
  const int c = static_cast<int>(index % pairs) * 2;
  const uint32_t v =
      uint32_t{values[t * values_stride + c]} | (uint32_t{values[t * values_stride + c + 1]} << 16);
  const uint32_t g =
      uint32_t{gate[t * gate_stride + c]} | (uint32_t{gate[t * gate_stride + c + 1]} << 16);
  const float2 vf = mla_tail::internal::device::Bf16x2ToFloat2(v);
  const uint32_t word = mla_tail::internal::device::GatePair(vf.x, vf.y, g, lengths[t / q] > 0);
  out[t * out_stride + c] = static_cast<uint16_t>(word & 0xFFFFu);
  out[t * out_stride + c + 1] = static_cast<uint16_t>(word >> 16);
}

}  // namespace

cudaError_t GateOutputs(const uint16_t* values, int64_t values_stride, const uint16_t* gate,
                        int64_t gate_stride, const int32_t* lengths, int q, int rows, int width,
                        uint16_t* out, int64_t out_stride, cudaStream_t stream) {
  if (rows <= 0 || width <= 0 || width % 2 != 0 || q <= 0) return cudaErrorInvalidValue;
  const int pairs = width / 2;
  constexpr int kThreads = 256;
  const int64_t blocks = (int64_t{rows} * pairs + kThreads - 1) / kThreads;
  GateOutputsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      values, values_stride, gate, gate_stride, lengths, q, rows, pairs, out, out_stride);
  return cudaGetLastError();
}

cudaError_t SigmoidOfEveryGate(cudaStream_t stream, float* sigmoids) {
  float* device = nullptr;
  cudaError_t e = cudaMalloc(&device, 65536 * sizeof(float));
  if (e != cudaSuccess) return e;
  SigmoidKernel<<<256, 256, 0, stream>>>(device);
  e = cudaGetLastError();
  if (e == cudaSuccess) {
    e = cudaMemcpyAsync(sigmoids, device, 65536 * sizeof(float), cudaMemcpyDeviceToHost, stream);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaFree(device);
  return e;
}

cudaError_t CheckGateMath(cudaStream_t stream, GateMathCounts* counts) {
  unsigned long long* counters = nullptr;
  unsigned* first = nullptr;
  cudaError_t e = cudaMalloc(&counters, 6 * sizeof(unsigned long long) + sizeof(unsigned));
  if (e != cudaSuccess) return e;
  first = reinterpret_cast<unsigned*>(counters + 6);
  unsigned long long host[6] = {};
  unsigned host_first = 0xFFFFFFFFu;
  if ((e = cudaMemsetAsync(counters, 0, 6 * sizeof(unsigned long long), stream)) == cudaSuccess &&
      (e = cudaMemsetAsync(first, 0xFF, sizeof(unsigned), stream)) == cudaSuccess) {
    constexpr int kThreads = 256;
    const int total = 65536 * 2 * kValueCount;
    GateMathKernel<<<total / kThreads, kThreads, 0, stream>>>(counters, first);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) {
    e = cudaMemcpyAsync(host, counters, sizeof(host), cudaMemcpyDeviceToHost, stream);
  }
  if (e == cudaSuccess) {
    e = cudaMemcpyAsync(&host_first, first, sizeof(host_first), cudaMemcpyDeviceToHost, stream);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaFree(counters);
  if (e != cudaSuccess) return e;
  counts->pairs = static_cast<int64_t>(host[0]);
  counts->in_range_mismatch = static_cast<int64_t>(host[1]);
  counts->gate_pairs_mismatch = static_cast<int64_t>(host[2]);
  counts->out_of_range = static_cast<int64_t>(host[3]);
  counts->out_of_range_above = static_cast<int64_t>(host[4]);
  counts->sigmoid_first_mismatch = static_cast<int64_t>(host[5]);
  counts->first_mismatch_gate = host_first;
  return cudaSuccess;
}

}  // namespace mla_tail_testing

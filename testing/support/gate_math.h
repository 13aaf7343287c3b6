#ifndef MLA_TAIL_TESTING_SUPPORT_GATE_MATH_H_
#define MLA_TAIL_TESTING_SUPPORT_GATE_MATH_H_

// Every bf16 gate through the kernels' gate computations (mla/kernels/device.cuh): the
// branch-free GatePairInRange against GatePair's IEEE division, GatePairs (what most kernels
// call) against GatePair, and the sigmoids first (SigmoidPairInRange, else SigmoidPair, then
// GateWithSigmoid: Tile's early sigmoids) against GatePair.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mla_tail_testing {

struct GateMathCounts {
  int64_t pairs = 0;                   // (gate, value, active) cases checked
  int64_t in_range_mismatch = 0;       // GatePairInRange != GatePair where it kept in_range
  int64_t gate_pairs_mismatch = 0;     // GatePairs != GatePair, anywhere
  int64_t out_of_range = 0;            // active cases where GatePairInRange cleared in_range
  int64_t out_of_range_above = 0;      // ... of them with a gate >= -87 (must be none)
  int64_t sigmoid_first_mismatch = 0;  // the sigmoids first != GatePair, or another in_range
  uint32_t first_mismatch_gate = 0;    // bf16 bits of the first mismatching gate, if any
};

// The sigmoid the kernels compute (SigmoidPair: what GatePair multiplies by) for each of the 65536
// bf16 gates, indexed by the gate's bits; `sigmoids` holds 65536 floats. Synchronizes the stream.
cudaError_t SigmoidOfEveryGate(cudaStream_t stream, float* sigmoids);

// Runs all 65536 bf16 gate values with each of a set of v (normal, subnormal, huge, signed
// zero, NaN), active and not, on `stream`, and counts. Synchronizes the stream.
cudaError_t CheckGateMath(cudaStream_t stream, GateMathCounts* counts);

// The contract's gated output from the same tail's ungated output: out[t, c] =
// GatePair(float(values[t, c]), gate[t, c]) for the rows [0, rows) and columns [0, width)
// (width even), +0.0 where the row's request is inactive (lengths[t / q] <= 0). `values` is
// bf16(acc) = v, so `out` is bf16(v · sigmoid(g)) with the kernels' sigmoid, the IEEE division.
// Row strides in elements. Enqueued on `stream`; nothing else written.
cudaError_t GateOutputs(const uint16_t* values, int64_t values_stride, const uint16_t* gate,
                        int64_t gate_stride, const int32_t* lengths, int q, int rows, int width,
                        uint16_t* out, int64_t out_stride, cudaStream_t stream);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_GATE_MATH_H_

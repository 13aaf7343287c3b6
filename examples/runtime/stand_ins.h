#ifndef MLA_TAIL_EXAMPLES_RUNTIME_STAND_INS_H_
#define MLA_TAIL_EXAMPLES_RUNTIME_STAND_INS_H_

// The runtime's own kernels around the tail, standing in for a model's: the attention kernel that
// writes each layer's latent, the output projection that reads the tail's output, and fills of
// the weights. Kernels that become graph nodes take one struct argument (the node's parameter).

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace example {

using bf16 = __nv_bfloat16;

struct AttentionArgs {
  bf16* latent = nullptr;  // [rows, heads, 512]
  int64_t row_stride = 0;  // elements
  int rows = 0;
  int heads = 0;       // the heads this device serves
  int first_head = 0;  // the model's head of the first of them
  int step = 0;        // the formulas' step (formulas.h)
  int layer = 0;
  long long spin_cycles = 0;  // how long the kernel runs on after its trigger (SM clocks)
};

// One block of 256 threads per row: writes latent[t, h] = LatentCode(step, layer, t,
// first_head + h, ...) / 16, then triggers its dependents (griddepcontrol.launch_dependents), then
// spins `spin_cycles`.
const void* AttentionKernel();
inline constexpr int kAttentionThreads = 256;

struct ProjectionArgs {
  const bf16* output = nullptr;  // the tail's output [rows, columns]
  int64_t row_stride = 0;
  int rows = 0;
  int columns = 0;
  float* checksum = nullptr;  // one float: the sum of ChecksumColumn's columns of every row
};

// One block of kProjectionThreads threads; the sum's order is ProjectionChecksum's.
const void* ProjectionKernel();
inline constexpr int kProjectionThreads = 256;

// The checksum ProjectionKernel writes for `output` (host memory, bf16 bits), added in the
// kernel's order, so that the two agree bit for bit.
float ProjectionChecksum(const uint16_t* output, int64_t row_stride, int rows, int columns);

// W_UV [heads, 128, 512] (d-major rows of 512 k) of buffer set `set`, layer `layer`: the model's
// heads first_head, first_head + 1, ...
cudaError_t FillWeights(bf16* w_uv, int heads, int first_head, int set, int layer,
                        cudaStream_t stream);
// gate [rows, columns] of buffer set `set`, layer `layer`: the model's columns first_column, ...
cudaError_t FillGate(bf16* gate, int rows, int columns, int first_column, int set, int layer,
                     cudaStream_t stream);

// Holds `stream` until *release is non-zero or `timeout_ns` passed (then *timed_out = 1): lets
// the host enqueue many launches before the GPU starts them, so that host time between launches
// does not enter a GPU timing. `release` and `timed_out` are mapped host memory.
cudaError_t HoldStream(const volatile int* release, int* timed_out, long long timeout_ns,
                       cudaStream_t stream);

}  // namespace example

#endif  // MLA_TAIL_EXAMPLES_RUNTIME_STAND_INS_H_

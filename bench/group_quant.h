#ifndef MLA_TAIL_BENCH_GROUP_QUANT_H_
#define MLA_TAIL_BENCH_GROUP_QUANT_H_

// The unfused peer of the tail's e4m3 output: a plain per-token-group quantization kernel, as a
// runtime runs it after a bf16 tail to feed a block-FP8 output projection. Each group of 128
// channels (one head) of a [rows, heads * 128] bf16 tensor becomes e4m3 values and an FP32 scale
// by docs/spec.md's rule (amax / 448; x * (448 / amax); zeros for amax = 0), so its output equals
// the fused tail's.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "mla_tail/mla/tail_args.h"

namespace mla_tail_bench {

struct GroupQuantParams {
  const mla_tail::bf16* input;  // [rows, heads * 128]
  int64_t input_row_stride;
  mla_tail::fp8_e4m3* output;  // [rows, heads * 128]
  int64_t output_row_stride;
  float* scales;  // (t, h) at t * scale_row_stride + h
  int64_t scale_row_stride;
  int rows, heads;
};

// One 16-lane group per (row, head), 8 values a lane; launched with PDL when `pdl` is set (it
// waits for the kernel before it, then lets the next one start).
cudaError_t LaunchGroupQuant(const GroupQuantParams& params, cudaStream_t stream, bool pdl);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_GROUP_QUANT_H_

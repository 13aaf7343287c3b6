#ifndef MLA_TAIL_MLA_TAIL_ARGS_H_
#define MLA_TAIL_MLA_TAIL_ARGS_H_

// The shapes and buffers of one layer's MLA attention tail (docs/spec.md):
// out[t, h*128 + d] = active(t) ? bf16(bf16(sum_k latent[t,h,k] * w_uv[h,k,d]) * sigmoid(gate)) :
// +0.

#include <cuda_bf16.h>

#include <cstdint>

#include "absl/status/status.h"

namespace mla_tail {

using bf16 = __nv_bfloat16;

inline constexpr int kLatentDim = 512;  // L: kv_lora_rank
inline constexpr int kValueDim = 128;   // D: v_head_dim
inline constexpr int kMaxHeads = 128;
inline constexpr int kMaxRows = 65536;  // rows of one call (tokens), far above any decode batch
inline constexpr int kMaxQ = 64;        // tokens per request
// Every row and head stride is at most 2^40 elements, so that rows x stride (and heads x
// w_head_stride) stays far inside int64 and inside the address space.
inline constexpr int64_t kMaxStride = int64_t{1} << 40;

struct TailShape {
  int heads = 0;  // H: local heads, 1..128
  int rows = 0;   // B: tokens = requests * q
  int q = 1;      // tokens per request; divides rows
};

// Strides are in elements. Every bf16 pointer and stride is 16-byte aligned (8 elements).
struct TailBuffers {
  const bf16* latent = nullptr;   // [B, H, 512]: row t at latent + t * latent_row_stride
  int64_t latent_row_stride = 0;  // >= H * 512
  const bf16* w_uv = nullptr;     // (h, k, d) at w_uv + h * w_head_stride + d * w_row_stride + k
  int64_t w_head_stride = 0;      // >= 128 * w_row_stride (128·512, or 256·512 for kv_b_proj)
  int64_t w_row_stride = kLatentDim;  // >= 512
  // [B, H * 128], row stride gate_row_stride. Null: no gate (DeepSeek-V2/V3, Kimi-K2): out =
  // bf16(v) for active rows; gate_row_stride is then not used.
  const bf16* gate = nullptr;
  int64_t gate_row_stride = 0;       // >= H * 128
  const int32_t* lengths = nullptr;  // [B / q]: a request is active when its length is > 0
  bf16* output = nullptr;            // [B, H * 128], row stride output_row_stride
  int64_t output_row_stride = 0;     // >= H * 128
  // Optional: one int32 on the device, the number of live rows n (written by the caller, upstream
  // of the tail or in stream order). Rows t >= n are neither read nor written (their output rows
  // keep what they held); rows below it keep their meaning, lengths included. Read when the tail
  // runs, clamped to [0, B]. Null: all B rows are live.
  const int32_t* row_count = nullptr;
};

// Buffers for compact tensors of `shape` (row strides at their minimum, W_UV as [H, 128, 512]).
TailBuffers CompactBuffers(const TailShape& shape, const bf16* latent, const bf16* w_uv,
                           const bf16* gate, const int32_t* lengths, bf16* output);

// InvalidArgument naming the argument and its value unless `shape` is within the limits above.
absl::Status ValidateShape(const TailShape& shape);

// ValidateShape, then every pointer (non-null, aligned), stride (aligned, large enough that rows
// do not overlap, at most kMaxStride) and that the output overlaps no input. Looks at addresses
// only: what memory they point at is checked by the calls that launch (MlaTail::Run and the graph
// calls), which ask CUDA.
absl::Status ValidateTail(const TailShape& shape, const TailBuffers& buffers);

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_TAIL_ARGS_H_

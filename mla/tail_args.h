#ifndef MLA_TAIL_MLA_TAIL_ARGS_H_
#define MLA_TAIL_MLA_TAIL_ARGS_H_

// The shapes and buffers of one layer's MLA attention tail (docs/spec.md):
// out[t, h*128 + d] = active(t) ? bf16(bf16(sum_k latent[t,h,k] * w_uv[h,k,d]) * sigmoid(gate)) :
// +0. W_UV is bf16, or e4m3 with FP32 scales per 128 x 128 block (dequantized to bf16 before the
// products); the output is bf16, or e4m3 with one FP32 scale per (row, head).

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "absl/status/status.h"

namespace mla_tail {

using bf16 = __nv_bfloat16;
using fp8_e4m3 = __nv_fp8_e4m3;  // float8_e4m3fn: max +-448, no infinities, NaN = S.1111.111

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

// Strides are in elements of their tensor. Every bf16 and e4m3 pointer and w_uv_scale are
// 16-byte aligned, and every row or head stride of a bf16 or e4m3 tensor spans a multiple of 16
// bytes (8 bf16 elements, 16 e4m3 elements); lengths and output_scale are 4-byte aligned.
struct TailBuffers {
  const bf16* latent = nullptr;   // [B, H, 512]: row t at latent + t * latent_row_stride
  int64_t latent_row_stride = 0;  // >= H * 512
  // W_UV: exactly one of w_uv (bf16) and w_uv_fp8 (e4m3 with block scales). Either way, (h, k, d)
  // at w + h * w_head_stride + d * w_row_stride + k.
  const bf16* w_uv = nullptr;
  const fp8_e4m3* w_uv_fp8 = nullptr;
  int64_t w_head_stride = 0;          // >= 128 * w_row_stride (128·512, or 256·512 for kv_b_proj)
  int64_t w_row_stride = kLatentDim;  // >= 512
  // With w_uv_fp8: the FP32 scale of head h's latent block j = k / 128 (one per 128 x 128 block)
  // at w_uv_scale + h * w_uv_scale_head_stride + j. A checkpoint's kv_b_proj weight_scale_inv
  // [H * 2, 4]: w_uv_scale = weight_scale_inv + 4 (the V half's block row), head stride 8; a
  // compact [H, 4]: head stride 4. A multiple of 4, >= 4.
  const float* w_uv_scale = nullptr;
  int64_t w_uv_scale_head_stride = 0;
  // [B, H * 128], row stride gate_row_stride. Null: no gate (DeepSeek-V2/V3, Kimi-K2): out =
  // bf16(v) for active rows; gate_row_stride is then not used.
  const bf16* gate = nullptr;
  int64_t gate_row_stride = 0;       // >= H * 128
  const int32_t* lengths = nullptr;  // [B / q]: a request is active when its length is > 0
  // The output: exactly one of output (bf16) and output_fp8 (e4m3, with output_scale), both
  // [B, H * 128] with row stride output_row_stride.
  bf16* output = nullptr;
  fp8_e4m3* output_fp8 = nullptr;
  int64_t output_row_stride = 0;  // >= H * 128
  // With output_fp8: the FP32 scale of (row t, head h) at output_scale +
  // t * output_scale_row_stride + h * output_scale_head_stride; [B, H] row-major (row stride >= H,
  // head stride 1) or head-major ([H, >= B]: row stride 1, head stride >= B).
  float* output_scale = nullptr;
  int64_t output_scale_row_stride = 0;
  int64_t output_scale_head_stride = 1;
  // Optional: one int32 on the device, the number of live rows n (written by the caller, upstream
  // of the tail or in stream order). Rows t >= n are neither read by the fused kernels (but see
  // rows_past_count_readable; the BMM path's GEMM reads their latent) nor written (their output
  // rows keep what they held); rows below it
  // keep their meaning, lengths included. Read when the tail runs, clamped to [0, B]. Null: all B
  // rows are live.
  const int32_t* row_count = nullptr;
  // Set when the count is final before the tail's upstream kernel begins: written by a copy or
  // kernel that completed before it (as a runtime copies its batch's metadata to the device
  // before it launches a step's graph). The fused kernels then read it as they start, while they
  // wait for the upstream kernel, instead of after: one memory round trip less on the path after
  // it. Unset: an upstream kernel may write the count, and it is read after the wait.
  bool row_count_before_upstream = false;
  // Set when the latent, gate and lengths of rows [n, B) are readable memory whatever n is, as a
  // bucket's buffers are (the pointer checks require all B rows allocated). The fused kernels
  // then load rows below B without waiting for the count, and use it only to decide which rows
  // they write and which blocks go on: rows t >= n may be read (their values change no output)
  // and are never written. That takes the count's load off the path before the latent's, where
  // it is one dependent memory round trip after the upstream kernel. No effect with
  // row_count_before_upstream (the count is then known before any load) or on the BMM path.
  bool rows_past_count_readable = false;
};

// The weight and output types of a tail's buffers (which of each pair is set).
enum class WeightType { kBf16, kE4m3 };
enum class OutputType { kBf16, kE4m3 };
inline WeightType WeightTypeOf(const TailBuffers& b) {
  return b.w_uv_fp8 != nullptr ? WeightType::kE4m3 : WeightType::kBf16;
}
inline OutputType OutputTypeOf(const TailBuffers& b) {
  return b.output_fp8 != nullptr ? OutputType::kE4m3 : OutputType::kBf16;
}

// Buffers for compact tensors of `shape` (row strides at their minimum, W_UV as [H, 128, 512]).
TailBuffers CompactBuffers(const TailShape& shape, const bf16* latent, const bf16* w_uv,
                           const bf16* gate, const int32_t* lengths, bf16* output);

// InvalidArgument naming the argument and its value unless `shape` is within the limits above.
absl::Status ValidateShape(const TailShape& shape);

// ValidateShape, then every pointer (non-null, aligned; exactly one of each weight and output
// pair), stride (aligned, large enough that rows do not overlap, at most kMaxStride) and that the
// outputs overlap no input and each other. Looks at addresses only: what memory they point at is
// checked by the calls that launch (MlaTail::Run and the graph calls), which ask CUDA.
absl::Status ValidateTail(const TailShape& shape, const TailBuffers& buffers);

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_TAIL_ARGS_H_

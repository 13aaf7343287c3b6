#ifndef MLA_TAIL_MLA_KERNELS_PARAMS_H_
#define MLA_TAIL_MLA_KERNELS_PARAMS_H_

// The kernels' parameter structs (each kernel's only argument) and the functions that fill them
// from a shape and the caller's buffers: the one mapping, used by the eager launches and by the
// graph nodes that graph/ writes. Shapes: B rows, H heads, q tokens a request; strides in
// elements. Nothing here validates: the callers (mla/tail.h, graph/) have checked every shape,
// stride and pointer.

#include <cstddef>
#include <cstdint>

#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

// The fused kernels': the W_UV projection and the gate (docs/spec.md). Of each pair (w_uv,
// w_uv_fp8) and (output, output_fp8) one is set, and the kernel is the instantiation for those
// types (mla/kernels/fp8.cuh).
struct FusedTailParams {
  const bf16* latent;  // [B, H, 512]: row t at latent + t * latent_row_stride
  int64_t latent_row_stride;
  const bf16* w_uv;          // (h, k, d) at w_uv + h * w_head_stride + d * w_row_stride + k
  const fp8_e4m3* w_uv_fp8;  // the same layout in e4m3 (strides in elements of either type)
  int64_t w_head_stride;
  int64_t w_row_stride;
  const float* w_uv_scale;  // with w_uv_fp8: head h's 4 block scales at h * the head stride
  int64_t w_uv_scale_head_stride;
  const bf16* gate;  // [B, H * 128]: row t at gate + t * gate_row_stride; null: no gate
  int64_t gate_row_stride;
  const int32_t* lengths;  // [B / q]: row t is active when lengths[t / q] > 0
  bf16* output;            // [B, H * 128]: row t at output + t * output_row_stride
  fp8_e4m3* output_fp8;    // the same layout in e4m3
  int64_t output_row_stride;
  float* output_scale;  // with output_fp8: (t, h) at t * row stride + h * head stride
  int64_t output_scale_row_stride;
  int64_t output_scale_head_stride;
  int heads;                      // H
  int rows;                       // B
  int q;                          // tokens a request
  const int32_t* row_count;       // null, or the live rows on the device
  bool row_count_early;           // the count is final before the upstream kernel begins
  bool rows_past_count_readable;  // rows [count, B) may be read (never written)
};

// The caller's buffers the gate reads and writes on the BMM path. BmmPointersKernel writes them
// to device memory and BmmGateKernel reads them from there, so that a pointer update on that path
// rewrites one kernel node (BmmPointersKernel's), as on the fused path.
struct GateOperands {
  const bf16* gate;  // [B, H * 128]; null: out = bf16(values)
  int64_t gate_row_stride;
  const int32_t* lengths;  // [B / q]
  bf16* output;            // [B, H * 128]
  int64_t output_row_stride;
  const int32_t* row_count;  // null, or the live rows on the device
};

// BmmGateKernel's: the gate applied to the batched GEMM's values.
struct BmmGateParams {
  const bf16* values;            // [H, B, 128]: head h, row t at values + (h * B + t) * 128
  const GateOperands* operands;  // written by BmmPointersKernel
  int heads;                     // H
  int rows;                      // B
  int q;                         // tokens a request
};

// BmmPointersKernel's: the per-head operand addresses of the pointer-array batched GEMM, and the
// gate's operands.
struct BmmPointerParams {
  const bf16* latent;  // [B, H, 512]
  const bf16* w_uv;    // per head [128, 512], latent axis contiguous
  int64_t w_head_stride;
  bf16* values;  // [H, B, 128]
  int heads;     // H
  int rows;      // B
  GateOperands gate;
  const void** a_table;      // [H]: W_UV of head h
  const void** b_table;      // [H]: latent of head h, row 0
  void** d_table;            // [H]: values of head h
  GateOperands* gate_table;  // where `gate` is written for BmmGateKernel
};

// The BMM path's device scratch for BmmPointersKernel's output: three tables of kMaxHeads
// addresses, then the gate's operands.
inline constexpr size_t kOperandTableBytes =
    3 * size_t{kMaxHeads} * sizeof(void*) + sizeof(GateOperands);

// A stride of an absent tensor is not validated and reaches the kernels as 0: the forms that run
// with a gate and without form the gate's offsets before testing for it.
inline FusedTailParams MakeFusedTailParams(const TailShape& shape, const TailBuffers& b) {
  return {b.latent,
          b.latent_row_stride,
          b.w_uv,
          b.w_uv_fp8,
          b.w_head_stride,
          b.w_row_stride,
          b.w_uv_scale,
          b.w_uv_scale_head_stride,
          b.gate,
          b.gate != nullptr ? b.gate_row_stride : 0,
          b.lengths,
          b.output,
          b.output_fp8,
          b.output_row_stride,
          b.output_scale,
          b.output_scale_row_stride,
          b.output_scale_head_stride,
          shape.heads,
          shape.rows,
          shape.q,
          b.row_count,
          b.row_count_before_upstream,
          b.rows_past_count_readable};
}

// `values` is the BMM path's [H, B, 128] scratch; `tables` is kOperandTableBytes of device
// memory (8-byte aligned).
inline BmmPointerParams MakeBmmPointerParams(const TailShape& shape, const TailBuffers& b,
                                             bf16* values, void* tables) {
  void** addresses = static_cast<void**>(tables);
  return {b.latent,
          b.w_uv,
          b.w_head_stride,
          values,
          shape.heads,
          shape.rows,
          {b.gate, b.gate != nullptr ? b.gate_row_stride : 0, b.lengths, b.output,
           b.output_row_stride, b.row_count},
          const_cast<const void**>(addresses),
          const_cast<const void**>(addresses + kMaxHeads),
          addresses + 2 * kMaxHeads,
          reinterpret_cast<GateOperands*>(addresses + 3 * kMaxHeads)};
}

// The gate after the GEMM whose tables `tables` fills.
inline BmmGateParams MakeBmmGateParams(const TailShape& shape, const BmmPointerParams& tables) {
  return {tables.values, tables.gate_table, shape.heads, shape.rows, shape.q};
}

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_KERNELS_PARAMS_H_

#ifndef MLA_TAIL_MLA_INTERNAL_TAIL_EXTENTS_H_
#define MLA_TAIL_MLA_INTERNAL_TAIL_EXTENTS_H_

// The bytes each buffer of a tail spans: from its pointer to the last byte a call of that shape
// reads or writes. Validation refuses outputs that overlap inputs by these extents, and the
// pointer checks (pointer_checks.h) ask CUDA whether each lies in one allocation the device can
// reach. Not part of the public API.

#include <array>
#include <cstdint>

#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

// Bytes [begin, end) of one buffer. Computed from validated strides (each at most kMaxStride),
// so no product overflows; `end < begin` means the span runs past the top of the address space,
// and validation refuses spans that end above 2^63 - 1 (no user address lies there), so that the
// overlap rule's signed arithmetic cannot overflow.
// An optional buffer that is absent spans nothing (begin == end == 0).
struct Extent {
  const char* name;
  uintptr_t begin, end;
};

// `rows` rows of `width` elements of `element_bytes` (bf16: 2), `row_stride` elements apart.
inline Extent RowsExtent(const char* name, const void* base, int64_t rows, int64_t row_stride,
                         int64_t width, int64_t element_bytes = 2) {
  const auto begin = reinterpret_cast<uintptr_t>(base);
  const auto bytes = static_cast<uintptr_t>(((rows - 1) * row_stride + width) * element_bytes);
  return {name, begin, begin + bytes};
}

// Every buffer a tail of `shape` (validated) over `buffers` (strides validated) touches: W_UV and
// the output of either type, and their scales where they are e4m3.
struct TailExtents {
  Extent latent, w_uv, gate, lengths, row_count, output, w_uv_scale, output_scale;
  std::array<Extent, 8> All() const {
    return {latent, w_uv, gate, lengths, row_count, output, w_uv_scale, output_scale};
  }
};

inline TailExtents ExtentsOf(const TailShape& shape, const TailBuffers& b) {
  const int64_t heads = shape.heads;
  const int64_t rows = shape.rows;
  const int64_t width = heads * kValueDim;
  const auto lengths_begin = reinterpret_cast<uintptr_t>(b.lengths);
  const auto row_count = reinterpret_cast<uintptr_t>(b.row_count);
  const bool fp8_weight = b.w_uv_fp8 != nullptr;
  const bool fp8_output = b.output_fp8 != nullptr;
  const auto w_scale = reinterpret_cast<uintptr_t>(b.w_uv_scale);
  const auto out_scale = reinterpret_cast<uintptr_t>(b.output_scale);
  // The output scales' strides are validated only with an e4m3 output, which alone has them.
  const int64_t last_scale = fp8_output
                                 ? (rows > 1 ? (rows - 1) * b.output_scale_row_stride : 0) +
                                       (heads > 1 ? (heads - 1) * b.output_scale_head_stride : 0)
                                 : 0;
  return {
      RowsExtent("latent", b.latent, rows, b.latent_row_stride, heads * kLatentDim),
      fp8_weight ? RowsExtent("w_uv_fp8", b.w_uv_fp8, heads, b.w_head_stride,
                              (kValueDim - 1) * b.w_row_stride + kLatentDim, 1)
                 : RowsExtent("w_uv", b.w_uv, heads, b.w_head_stride,
                              (kValueDim - 1) * b.w_row_stride + kLatentDim),
      b.gate != nullptr ? RowsExtent("gate", b.gate, rows, b.gate_row_stride, width)
                        : Extent{"gate", 0, 0},
      {"lengths", lengths_begin,
       lengths_begin + static_cast<uintptr_t>(rows / shape.q) * sizeof(int32_t)},
      {"row_count", row_count, row_count == 0 ? 0 : row_count + sizeof(int32_t)},
      fp8_output ? RowsExtent("output_fp8", b.output_fp8, rows, b.output_row_stride, width, 1)
                 : RowsExtent("output", b.output, rows, b.output_row_stride, width),
      fp8_weight ? RowsExtent("w_uv_scale", b.w_uv_scale, heads,
                              heads > 1 ? b.w_uv_scale_head_stride : 0, 4, sizeof(float))
                 : Extent{"w_uv_scale", w_scale, w_scale},
      fp8_output ? Extent{"output_scale", out_scale,
                          out_scale + static_cast<uintptr_t>(last_scale + 1) * sizeof(float)}
                 : Extent{"output_scale", out_scale, out_scale},
  };
}

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_TAIL_EXTENTS_H_

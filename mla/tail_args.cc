#include "mla_tail/mla/tail_args.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mla_tail {
namespace {

constexpr int64_t kBf16Align = 16;  // bytes

absl::Status CheckPointer(const void* pointer, const char* name, int64_t alignment) {
  if (pointer == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is null"));
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (address % alignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %p is not %d-byte aligned", name, pointer, alignment));
  }
  return absl::OkStatus();
}

absl::Status CheckStride(int64_t stride, int64_t minimum, const char* name,
                         const char* minimum_meaning) {
  if (stride < minimum) {
    return absl::InvalidArgumentError(absl::StrCat(name, " = ", stride, " is below ",
                                                   minimum_meaning, " = ", minimum,
                                                   ": rows would overlap"));
  }
  if (stride % (kBf16Align / sizeof(bf16)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = ", stride, " is not a multiple of 8 elements (16 bytes)"));
  }
  return absl::OkStatus();
}

// The bytes [begin, end) that a strided bf16 tensor of `rows` rows of `width` elements spans.
struct Extent {
  uintptr_t begin, end;
};

Extent RowsExtent(const void* base, int64_t rows, int64_t row_stride, int64_t width) {
  const auto begin = reinterpret_cast<uintptr_t>(base);
  return {begin, begin + static_cast<uintptr_t>(((rows - 1) * row_stride + width) * 2)};
}

bool Overlap(Extent a, Extent b) { return a.begin < b.end && b.begin < a.end; }

}  // namespace

TailBuffers CompactBuffers(const TailShape& shape, const bf16* latent, const bf16* w_uv,
                           const bf16* gate, const int32_t* lengths, bf16* output) {
  TailBuffers b;
  b.latent = latent;
  b.latent_row_stride = int64_t{shape.heads} * kLatentDim;
  b.w_uv = w_uv;
  b.w_head_stride = int64_t{kValueDim} * kLatentDim;
  b.w_row_stride = kLatentDim;
  b.gate = gate;
  b.gate_row_stride = int64_t{shape.heads} * kValueDim;
  b.lengths = lengths;
  b.output = output;
  b.output_row_stride = int64_t{shape.heads} * kValueDim;
  return b;
}

absl::Status ValidateShape(const TailShape& shape) {
  if (shape.heads < 1 || shape.heads > kMaxHeads) {
    return absl::InvalidArgumentError(
        absl::StrCat("heads = ", shape.heads, " is outside [1, ", kMaxHeads, "]"));
  }
  if (shape.q < 1 || shape.q > kMaxQ) {
    return absl::InvalidArgumentError(
        absl::StrCat("q = ", shape.q, " is outside [1, ", kMaxQ, "]"));
  }
  if (shape.rows < 1 || shape.rows > kMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows = ", shape.rows, " is outside [1, ", kMaxRows, "]"));
  }
  if (shape.rows % shape.q != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows = ", shape.rows, " is not a multiple of q = ", shape.q));
  }
  return absl::OkStatus();
}

absl::Status ValidateTail(const TailShape& shape, const TailBuffers& b) {
  if (absl::Status s = ValidateShape(shape); !s.ok()) return s;
  const int64_t heads = shape.heads;
  const int64_t width = heads * kValueDim;  // output and gate row width

  for (const auto& [pointer, name] : {std::pair<const void*, const char*>{b.latent, "latent"},
                                      {b.w_uv, "w_uv"},
                                      {b.gate, "gate"},
                                      {b.output, "output"}}) {
    if (absl::Status s = CheckPointer(pointer, name, kBf16Align); !s.ok()) return s;
  }
  if (absl::Status s = CheckPointer(b.lengths, "lengths", alignof(int32_t)); !s.ok()) return s;

  if (absl::Status s =
          CheckStride(b.latent_row_stride, heads * kLatentDim, "latent_row_stride", "heads * 512");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckStride(b.w_row_stride, kLatentDim, "w_row_stride", "512"); !s.ok()) {
    return s;
  }
  // One head's W_UV spans 128 rows; a single head may use any head stride (it is never applied).
  if (absl::Status s = CheckStride(b.w_head_stride, heads > 1 ? kValueDim * b.w_row_stride : 0,
                                   "w_head_stride", "128 * w_row_stride");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckStride(b.gate_row_stride, width, "gate_row_stride", "heads * 128");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckStride(b.output_row_stride, width, "output_row_stride", "heads * 128");
      !s.ok()) {
    return s;
  }

  // The kernels read inputs while other blocks write the output: no output byte may be an input.
  const int64_t rows = shape.rows;
  const Extent output = RowsExtent(b.output, rows, b.output_row_stride, width);
  const Extent latent = RowsExtent(b.latent, rows, b.latent_row_stride, heads * kLatentDim);
  const Extent gate = RowsExtent(b.gate, rows, b.gate_row_stride, width);
  const Extent w_uv =
      RowsExtent(b.w_uv, heads, b.w_head_stride, (kValueDim - 1) * b.w_row_stride + kLatentDim);
  const auto lengths_begin = reinterpret_cast<uintptr_t>(b.lengths);
  const Extent lengths{lengths_begin,
                       lengths_begin + static_cast<uintptr_t>(rows / shape.q) * sizeof(int32_t)};
  for (const auto& [extent, name] : {std::pair<Extent, const char*>{latent, "latent"},
                                     {gate, "gate"},
                                     {w_uv, "w_uv"},
                                     {lengths, "lengths"}}) {
    if (Overlap(output, extent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output overlaps ", name, ": the tail cannot run in place"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mla_tail

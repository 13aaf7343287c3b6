#include "mla_tail/mla/tail_args.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mla/internal/tail_extents.h"

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
  if (stride > kMaxStride) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = ", stride, " is above kMaxStride = 2^40 elements"));
  }
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

bool Overlap(const internal::Extent& a, const internal::Extent& b) {
  return a.begin < b.end && b.begin < a.end;
}

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
                                      {b.output, "output"}}) {
    if (absl::Status s = CheckPointer(pointer, name, kBf16Align); !s.ok()) return s;
  }
  // The gate and the row count are optional.
  if (b.gate != nullptr) {
    if (absl::Status s = CheckPointer(b.gate, "gate", kBf16Align); !s.ok()) return s;
  }
  if (absl::Status s = CheckPointer(b.lengths, "lengths", alignof(int32_t)); !s.ok()) return s;
  if (b.row_count != nullptr) {
    if (absl::Status s = CheckPointer(b.row_count, "row_count", alignof(int32_t)); !s.ok()) {
      return s;
    }
  }

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
  if (b.gate != nullptr) {
    if (absl::Status s = CheckStride(b.gate_row_stride, width, "gate_row_stride", "heads * 128");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CheckStride(b.output_row_stride, width, "output_row_stride", "heads * 128");
      !s.ok()) {
    return s;
  }

  const internal::TailExtents e = internal::ExtentsOf(shape, b);
  for (const internal::Extent& extent :
       {e.latent, e.w_uv, e.gate, e.lengths, e.row_count, e.output}) {
    if (extent.end < extent.begin) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s = %p: the bytes it spans run past the end of the address space",
                          extent.name, reinterpret_cast<const void*>(extent.begin)));
    }
  }
  // The kernels read inputs while other blocks write the output: no output byte may be an input.
  for (const internal::Extent& input : {e.latent, e.gate, e.w_uv, e.lengths, e.row_count}) {
    if (Overlap(e.output, input)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output overlaps ", input.name, ": the tail cannot run in place"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mla_tail

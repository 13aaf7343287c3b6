#include "mla_tail/mla/tail_args.h"

#include <algorithm>
#include <cstdint>
#include <utility>

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

// The bytes a strided tensor touches: `count` rows of `width` bytes, `stride` bytes apart
// (stride >= width, or a single row), the first at `begin`.
struct Rows {
  int64_t begin, count, stride, width;
  int64_t end() const { return begin + (count - 1) * stride + width; }
};

// Floor division for a positive divisor.
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The first row of `b` that ends after byte `x`, if b starts no later than where it could.
int64_t FirstRowEndingAfter(const Rows& b, int64_t x) {
  return std::max<int64_t>(0, FloorDiv(x - b.begin - b.width, b.stride) + 1);
}

// Whether a row of `a` and a row of `b` share a byte. O(1) when the strides are equal (a gate
// and an output interleaved in one wider row), else one step per row of the shorter tensor;
// tensors whose extents are disjoint (separate allocations) cost one comparison.
bool Intersect(const Rows& a, const Rows& b) {
  if (a.end() <= b.begin || b.end() <= a.begin) return false;
  if (a.count == 1 || b.count == 1 || a.stride == b.stride) {
    if (a.count > 1 && b.count > 1) {
      // Row i of a against row i + k of b: b.begin - a.begin + k * stride in (-b.width, a.width).
      const int64_t s = a.stride, delta = b.begin - a.begin;
      const int64_t k = std::max(FloorDiv(-b.width - delta, s) + 1, -(a.count - 1));
      return k <= b.count - 1 && delta + k * s < a.width;
    }
    const Rows& one = a.count == 1 ? a : b;
    const Rows& many = a.count == 1 ? b : a;
    if (many.count == 1) return true;  // two rows whose extents overlap
    const int64_t j = FirstRowEndingAfter(many, one.begin);
    return j < many.count && many.begin + j * many.stride < one.end();
  }
  const Rows& fewer = a.count <= b.count ? a : b;
  const Rows& more = a.count <= b.count ? b : a;
  for (int64_t i = 0; i < fewer.count; ++i) {
    const int64_t x = fewer.begin + i * fewer.stride;
    const int64_t j = FirstRowEndingAfter(more, x);
    if (j < more.count && more.begin + j * more.stride < x + fewer.width) return true;
  }
  return false;
}

int64_t Address(const void* pointer) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(pointer));
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

  // The kernels read inputs while other blocks write the output: no output byte may be a byte
  // an input is read from. Rows are compared byte for byte, so a gate sliced from a wider row
  // may interleave with the output (the gate in one part of each row, the output in another).
  constexpr int64_t kBytes = sizeof(bf16);
  const int64_t rows = shape.rows;
  const Rows output{Address(b.output), rows, b.output_row_stride * kBytes, width * kBytes};
  const Rows latent{Address(b.latent), rows, b.latent_row_stride * kBytes,
                    heads * kLatentDim * kBytes};
  const Rows gate{Address(b.gate), rows, b.gate_row_stride * kBytes, width * kBytes};
  const Rows lengths{Address(b.lengths), 1, 1,
                     static_cast<int64_t>(rows / shape.q * sizeof(int32_t))};
  for (const auto& [input, name] :
       {std::pair<Rows, const char*>{latent, "latent"}, {gate, "gate"}, {lengths, "lengths"}}) {
    if (Intersect(output, input)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output overlaps ", name, ": the tail cannot run in place"));
    }
  }
  // W_UV: per head, 128 rows of 512 elements; head by head only where its extent meets the
  // output's.
  const int64_t head_bytes = ((kValueDim - 1) * b.w_row_stride + kLatentDim) * kBytes;
  const Rows w_extent{Address(b.w_uv), 1, 1, (heads - 1) * b.w_head_stride * kBytes + head_bytes};
  if (Intersect(output, w_extent)) {
    for (int64_t h = 0; h < heads; ++h) {
      const Rows w_uv{Address(b.w_uv + h * b.w_head_stride), kValueDim, b.w_row_stride * kBytes,
                      kLatentDim * kBytes};
      if (Intersect(output, w_uv)) {
        return absl::InvalidArgumentError(
            absl::StrCat("output overlaps w_uv (head ", h, "): the tail cannot run in place"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mla_tail

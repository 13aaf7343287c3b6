#include "mla_tail/mla/tail_args.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mla/internal/tail_extents.h"

namespace mla_tail {
namespace {

constexpr int64_t kAlign = 16;  // bytes: of every bf16 and e4m3 pointer and row

// Returns `expression`'s status unless it is OK.
#define MLA_TAIL_CHECK(expression)                           \
  do {                                                       \
    if (absl::Status s_ = (expression); !s_.ok()) return s_; \
  } while (false)

absl::Status CheckPointer(const void* pointer, const char* name, int64_t alignment) {
  if (pointer == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is null"));
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (address % alignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %p is not %d-byte aligned", name, pointer, alignment));
  }
  return absl::OkStatus();
}

// A row stride of a tensor of `element_bytes`-byte elements: at most kMaxStride, at least
// `minimum`, spanning a multiple of 16 bytes.
absl::Status CheckStride(int64_t stride, int64_t minimum, const char* name,
                         const char* minimum_meaning, int64_t element_bytes = sizeof(bf16)) {
  if (stride > kMaxStride) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = ", stride, " is above kMaxStride = 2^40 elements"));
  }
  if (stride < minimum) {
    return absl::InvalidArgumentError(absl::StrCat(name, " = ", stride, " is below ",
                                                   minimum_meaning, " = ", minimum,
                                                   ": rows would overlap"));
  }
  const int64_t multiple = kAlign / element_bytes;
  if (stride % multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, " = ", stride, " is not a multiple of ",
                                                   multiple, " elements (16 bytes)"));
  }
  return absl::OkStatus();
}

// Exactly one of a pair of pointers is set.
absl::Status CheckOneOf(const void* a, const char* a_name, const void* b, const char* b_name) {
  if (a != nullptr && b != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(a_name, " and ", b_name, " are both set: exactly one may be"));
  }
  if (a == nullptr && b == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(a_name, " is null (and so is ", b_name, "): exactly one must be set"));
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
  MLA_TAIL_CHECK(ValidateShape(shape));
  const int64_t heads = shape.heads;
  const int64_t rows = shape.rows;
  const int64_t width = heads * kValueDim;  // output and gate row width
  const bool fp8_weight = b.w_uv_fp8 != nullptr;
  const bool fp8_output = b.output_fp8 != nullptr;

  MLA_TAIL_CHECK(CheckOneOf(b.w_uv, "w_uv", b.w_uv_fp8, "w_uv_fp8"));
  MLA_TAIL_CHECK(CheckOneOf(b.output, "output", b.output_fp8, "output_fp8"));
  const void* w = fp8_weight ? static_cast<const void*>(b.w_uv_fp8) : b.w_uv;
  const char* w_name = fp8_weight ? "w_uv_fp8" : "w_uv";
  const void* out = fp8_output ? static_cast<const void*>(b.output_fp8) : b.output;
  const char* out_name = fp8_output ? "output_fp8" : "output";
  for (const auto& [pointer, name] :
       {std::pair<const void*, const char*>{b.latent, "latent"}, {w, w_name}, {out, out_name}}) {
    MLA_TAIL_CHECK(CheckPointer(pointer, name, kAlign));
  }
  // The gate and the row count are optional.
  if (b.gate != nullptr) MLA_TAIL_CHECK(CheckPointer(b.gate, "gate", kAlign));
  MLA_TAIL_CHECK(CheckPointer(b.lengths, "lengths", alignof(int32_t)));
  if (b.row_count != nullptr) {
    MLA_TAIL_CHECK(CheckPointer(b.row_count, "row_count", alignof(int32_t)));
  } else if (b.row_count_before_upstream) {
    return absl::InvalidArgumentError(
        "row_count_before_upstream is set without row_count: there is no count to read early");
  } else if (b.rows_past_count_readable) {
    return absl::InvalidArgumentError(
        "rows_past_count_readable is set without row_count: there is no count to read past");
  }
  if (fp8_weight) {
    MLA_TAIL_CHECK(CheckPointer(b.w_uv_scale, "w_uv_scale", kAlign));
  } else if (b.w_uv_scale != nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "w_uv_scale is set without w_uv_fp8: bf16 W_UV has none (w_uv_scale = %p)", b.w_uv_scale));
  }
  if (fp8_output) {
    MLA_TAIL_CHECK(CheckPointer(b.output_scale, "output_scale", alignof(float)));
  } else if (b.output_scale != nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "output_scale is set without output_fp8: a bf16 output has none (output_scale = %p)",
        b.output_scale));
  }

  MLA_TAIL_CHECK(
      CheckStride(b.latent_row_stride, heads * kLatentDim, "latent_row_stride", "heads * 512"));
  const int64_t w_bytes = fp8_weight ? 1 : sizeof(bf16);
  MLA_TAIL_CHECK(CheckStride(b.w_row_stride, kLatentDim, "w_row_stride", "512", w_bytes));
  // One head's W_UV spans 128 rows; a single head may use any head stride (it is never applied).
  MLA_TAIL_CHECK(CheckStride(b.w_head_stride, heads > 1 ? kValueDim * b.w_row_stride : 0,
                             "w_head_stride", "128 * w_row_stride", w_bytes));
  if (fp8_weight && heads > 1) {
    // The kernels load a head's 4 scales as one 16-byte word.
    MLA_TAIL_CHECK(CheckStride(b.w_uv_scale_head_stride, 4, "w_uv_scale_head_stride",
                               "the 4 blocks of a head", sizeof(float)));
  }
  if (b.gate != nullptr) {
    MLA_TAIL_CHECK(CheckStride(b.gate_row_stride, width, "gate_row_stride", "heads * 128"));
  }
  const int64_t out_bytes = fp8_output ? 1 : sizeof(bf16);
  MLA_TAIL_CHECK(
      CheckStride(b.output_row_stride, width, "output_row_stride", "heads * 128", out_bytes));
  const int64_t scale_row = rows > 1 ? b.output_scale_row_stride : 0;
  const int64_t scale_head = heads > 1 ? b.output_scale_head_stride : 0;
  if (fp8_output) {
    if (rows > 1 && (scale_row < 1 || scale_row > kMaxStride)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_scale_row_stride = ", scale_row, " is outside [1, kMaxStride]"));
    }
    if (heads > 1 && (scale_head < 1 || scale_head > kMaxStride)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_scale_head_stride = ", scale_head, " is outside [1, kMaxStride]"));
    }
    if (rows > 1 && heads > 1 && scale_row < heads * scale_head && scale_head < rows * scale_row) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output_scale_row_stride = ", scale_row, " and output_scale_head_stride = ", scale_head,
          " make scales overlap: need row stride >= heads * head stride (", heads * scale_head,
          ") or head stride >= rows * row stride (", rows * scale_row, ")"));
    }
  }

  // Strides are bounded, so no span's size overflows; a span may still run past the top of the
  // address space.
  const internal::TailExtents e = internal::ExtentsOf(shape, b);
  for (const internal::Extent& extent : e.All()) {
    if (extent.end < extent.begin ||
        extent.end > static_cast<uintptr_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s = %p: the bytes it spans run past the end of the address space",
                          extent.name, reinterpret_cast<const void*>(extent.begin)));
    }
  }

  // The kernels read inputs while other blocks write the outputs: no output byte may be a byte
  // an input is read from. Rows are compared byte for byte, so a gate sliced from a wider row
  // may interleave with the output (the gate in one part of each row, the output in another).
  constexpr int64_t kBytes = sizeof(bf16);
  absl::InlinedVector<std::pair<Rows, const char*>, 2> outputs = {
      {Rows{Address(out), rows, b.output_row_stride * out_bytes, width * out_bytes}, out_name}};
  if (fp8_output) {
    // The scales as rows of the larger stride (each spanning the entries of the smaller one);
    // one row of them is row-major, so a layout keeps its spans whatever the batch.
    const bool row_major = rows == 1 || scale_row >= heads * scale_head;
    const Rows scales = row_major ? Rows{Address(b.output_scale), rows, scale_row * 4,
                                         ((heads - 1) * scale_head + 1) * 4}
                                  : Rows{Address(b.output_scale), heads, scale_head * 4,
                                         ((rows - 1) * scale_row + 1) * 4};
    if (Intersect(outputs[0].first, scales)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("output_scale overlaps output_fp8 (output_scale = %p, output_fp8 = %p)",
                          b.output_scale, out));
    }
    outputs.push_back({scales, "output_scale"});
  }
  absl::InlinedVector<std::pair<Rows, const char*>, 5> inputs = {
      {Rows{Address(b.latent), rows, b.latent_row_stride * kBytes, heads * kLatentDim * kBytes},
       "latent"},
      {Rows{Address(b.lengths), 1, 1, static_cast<int64_t>(rows / shape.q * sizeof(int32_t))},
       "lengths"},
      {Rows{Address(b.row_count), 1, 1, sizeof(int32_t)}, "row_count"}};
  // Without a gate its stride is not validated (nor used).
  if (b.gate != nullptr) {
    inputs.push_back(
        {Rows{Address(b.gate), rows, b.gate_row_stride * kBytes, width * kBytes}, "gate"});
  }
  if (fp8_weight) {
    const int64_t stride = heads > 1 ? b.w_uv_scale_head_stride : 4;
    inputs.push_back({Rows{Address(b.w_uv_scale), heads, stride * 4, 16}, "w_uv_scale"});
  }
  for (const auto& [output, output_name] : outputs) {
    for (const auto& [input, name] : inputs) {
      if (input.begin == 0) continue;  // an optional input that is absent
      if (Intersect(output, input)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s overlaps %s: the tail cannot run in place (%s = %p, %s = %p)", output_name, name,
            output_name, reinterpret_cast<const void*>(output.begin), name,
            reinterpret_cast<const void*>(input.begin)));
      }
    }
    // W_UV: per head, 128 rows of 512 elements; head by head only where its extent meets the
    // output's.
    const int64_t head_bytes = ((kValueDim - 1) * b.w_row_stride + kLatentDim) * w_bytes;
    const Rows w_extent{Address(w), 1, 1, (heads - 1) * b.w_head_stride * w_bytes + head_bytes};
    if (Intersect(output, w_extent)) {
      for (int64_t h = 0; h < heads; ++h) {
        const Rows w_head{Address(w) + h * b.w_head_stride * w_bytes, kValueDim,
                          b.w_row_stride * w_bytes, kLatentDim * w_bytes};
        if (Intersect(output, w_head)) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s overlaps %s (head %d): the tail cannot run in place (%s = %p, head %d of %s = "
              "%p)",
              output_name, w_name, h, output_name, reinterpret_cast<const void*>(output.begin), h,
              w_name, reinterpret_cast<const void*>(w_head.begin)));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mla_tail

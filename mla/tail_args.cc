#include "mla_tail/mla/tail_args.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mla_tail {
namespace {

// Returns `expression`'s status unless it is OK.
#define MLA_TAIL_CHECK(expression)                           \
  do {                                                       \
    if (absl::Status s_ = (expression); !s_.ok()) return s_; \
  } while (false)

constexpr int64_t kAlign = 16;  // bytes: of every bf16 and e4m3 pointer and row

absl::Status CheckPointer(const void* pointer, const char* name, int64_t alignment) {
  if (pointer == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is null"));
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (address % alignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s = %p is not %d-byte aligned", name, pointer, alignment));
  }
  return absl::OkStatus();
}

// A row stride of a tensor of `element_bytes`-byte elements: at least `minimum`, spanning a
// multiple of 16 bytes.
absl::Status CheckStride(int64_t stride, int64_t minimum, const char* name,
                         const char* minimum_meaning, int64_t element_bytes = sizeof(bf16)) {
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

// The bytes [begin, end) that a strided tensor of `rows` rows of `width` elements of
// `element_bytes` bytes spans.
struct Extent {
  uintptr_t begin, end;
};

Extent RowsExtent(const void* base, int64_t rows, int64_t row_stride, int64_t width,
                  int64_t element_bytes = sizeof(bf16)) {
  const auto begin = reinterpret_cast<uintptr_t>(base);
  return {begin, begin + static_cast<uintptr_t>(((rows - 1) * row_stride + width) * element_bytes)};
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
  const int64_t rows = shape.rows;
  const int64_t width = heads * kValueDim;  // output and gate row width
  const bool fp8_weight = b.w_uv_fp8 != nullptr;
  const bool fp8_output = b.output_fp8 != nullptr;

  MLA_TAIL_CHECK(CheckOneOf(b.w_uv, "w_uv", b.w_uv_fp8, "w_uv_fp8"));
  MLA_TAIL_CHECK(CheckOneOf(b.output, "output", b.output_fp8, "output_fp8"));
  const void* w = fp8_weight ? static_cast<const void*>(b.w_uv_fp8) : b.w_uv;
  const char* w_name = fp8_weight ? "w_uv_fp8" : "w_uv";
  const void* output = fp8_output ? static_cast<const void*>(b.output_fp8) : b.output;
  const char* output_name = fp8_output ? "output_fp8" : "output";
  for (const auto& [pointer, name] : {std::pair<const void*, const char*>{b.latent, "latent"},
                                      {w, w_name},
                                      {b.gate, "gate"},
                                      {output, output_name}}) {
    MLA_TAIL_CHECK(CheckPointer(pointer, name, kAlign));
  }
  MLA_TAIL_CHECK(CheckPointer(b.lengths, "lengths", alignof(int32_t)));
  if (fp8_weight) {
    MLA_TAIL_CHECK(CheckPointer(b.w_uv_scale, "w_uv_scale", kAlign));
  } else if (b.w_uv_scale != nullptr) {
    return absl::InvalidArgumentError("w_uv_scale is set without w_uv_fp8: bf16 W_UV has none");
  }
  if (fp8_output) {
    MLA_TAIL_CHECK(CheckPointer(b.output_scale, "output_scale", alignof(float)));
  } else if (b.output_scale != nullptr) {
    return absl::InvalidArgumentError(
        "output_scale is set without output_fp8: a bf16 output has none");
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
  MLA_TAIL_CHECK(CheckStride(b.gate_row_stride, width, "gate_row_stride", "heads * 128"));
  const int64_t output_bytes = fp8_output ? 1 : sizeof(bf16);
  MLA_TAIL_CHECK(
      CheckStride(b.output_row_stride, width, "output_row_stride", "heads * 128", output_bytes));
  if (fp8_output) {
    const int64_t row = b.output_scale_row_stride, head = b.output_scale_head_stride;
    if (rows > 1 && row < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_scale_row_stride = ", row, " is below 1"));
    }
    if (heads > 1 && head < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_scale_head_stride = ", head, " is below 1"));
    }
    if (rows > 1 && heads > 1 && row < heads * head && head < rows * row) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_scale_row_stride = ", row, " and output_scale_head_stride = ", head,
                       " make scales overlap: need row stride >= heads * head stride (",
                       heads * head, ") or head stride >= rows * row stride (", rows * row, ")"));
    }
  }

  // The kernels read inputs while other blocks write the outputs: no output byte may be an input.
  const Extent out = RowsExtent(output, rows, b.output_row_stride, width, output_bytes);
  const Extent latent = RowsExtent(b.latent, rows, b.latent_row_stride, heads * kLatentDim);
  const Extent gate = RowsExtent(b.gate, rows, b.gate_row_stride, width);
  const Extent w_uv =
      RowsExtent(w, heads, b.w_head_stride, (kValueDim - 1) * b.w_row_stride + kLatentDim, w_bytes);
  const auto lengths_begin = reinterpret_cast<uintptr_t>(b.lengths);
  const Extent lengths{lengths_begin,
                       lengths_begin + static_cast<uintptr_t>(rows / shape.q) * sizeof(int32_t)};
  std::vector<std::pair<Extent, const char*>> inputs = {
      {latent, "latent"}, {gate, "gate"}, {w_uv, w_name}, {lengths, "lengths"}};
  if (fp8_weight) {
    inputs.push_back({RowsExtent(b.w_uv_scale, heads, b.w_uv_scale_head_stride, 4, sizeof(float)),
                      "w_uv_scale"});
  }
  std::vector<std::pair<Extent, const char*>> outputs = {{out, output_name}};
  if (fp8_output) {
    const auto begin = reinterpret_cast<uintptr_t>(b.output_scale);
    const int64_t last = (rows - 1) * (rows > 1 ? b.output_scale_row_stride : 0) +
                         (heads - 1) * (heads > 1 ? b.output_scale_head_stride : 0);
    outputs.push_back(
        {Extent{begin, begin + static_cast<uintptr_t>(last + 1) * sizeof(float)}, "output_scale"});
    if (Overlap(outputs[0].first, outputs[1].first)) {
      return absl::InvalidArgumentError("output_scale overlaps output_fp8");
    }
  }
  for (const auto& [out_extent, out_name] : outputs) {
    for (const auto& [extent, name] : inputs) {
      if (Overlap(out_extent, extent)) {
        return absl::InvalidArgumentError(
            absl::StrCat(out_name, " overlaps ", name, ": the tail cannot run in place"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mla_tail

#include "testing/support/fp8.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "testing/support/e4m3_bits.h"
#include "testing/support/test_values.h"

namespace mla_tail_testing {

using mla_tail::kLatentDim;
using mla_tail::kValueDim;

namespace {

template <typename T>
absl::Status Upload(DeviceMemory& memory, const std::vector<T>& host) {
  MLA_RETURN_IF_ERROR(memory.Reset(host.size() * sizeof(T)));
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(memory.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
      "upload");
  // A copy from pageable memory may return before its data lands, and its legacy stream is not
  // ordered with the tests' non-blocking streams.
  return mla_tail::internal::CudaStatus(cudaDeviceSynchronize(), "upload");
}

template <typename T>
absl::StatusOr<std::vector<T>> Download(const DeviceMemory& memory) {
  std::vector<T> host(memory.bytes() / sizeof(T));
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(host.data(), memory.get(), memory.bytes(), cudaMemcpyDeviceToHost), "download");
  return host;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Fp8Weights>> Fp8Weights::Create(int heads,
                                                               const Fp8WeightOptions& options) {
  std::unique_ptr<Fp8Weights> w(new Fp8Weights());
  const bool view = options.kv_b_proj_view;
  w->w_row_stride_ = kLatentDim + options.row_padding;
  w->w_head_stride_ = int64_t{view ? 256 : 128} * w->w_row_stride_;
  w->w_offset_ = view ? int64_t{kValueDim} * w->w_row_stride_ : 0;
  w->scale_head_stride_ = view ? 8 : 4;
  w->scale_offset_ = view ? 4 : 0;
  // What the tail must not read holds NaN: the K half of kv_b_proj and its scales.
  w->w_host_.assign(size_t(heads) * w->w_head_stride_, 0xff);
  w->scales_host_.assign(size_t(heads) * w->scale_head_stride_,
                         std::numeric_limits<float>::quiet_NaN());
  for (int h = 0; h < heads; ++h) {
    for (int d = 0; d < kValueDim; ++d) {
      for (int k = 0; k < kLatentDim; ++k) {
        w->w_host_[w->w_offset_ + h * w->w_head_stride_ + d * w->w_row_stride_ + k] =
            Fp8WeightCode(options, h, k, d);
      }
    }
    for (int j = 0; j < 4; ++j) {
      w->scales_host_[w->scale_offset_ + h * w->scale_head_stride_ + j] =
          Fp8BlockScale(options, h, j);
    }
  }
  MLA_RETURN_IF_ERROR(Upload(w->w_, w->w_host_));
  MLA_RETURN_IF_ERROR(Upload(w->scales_, w->scales_host_));
  return w;
}

void Fp8Weights::Apply(mla_tail::TailBuffers* b) const {
  b->w_uv = nullptr;
  b->w_uv_fp8 = w_.as<mla_tail::fp8_e4m3>() + w_offset_;
  b->w_head_stride = w_head_stride_;
  b->w_row_stride = w_row_stride_;
  b->w_uv_scale = scales_.as<float>() + scale_offset_;
  b->w_uv_scale_head_stride = scale_head_stride_;
}

void Fp8Weights::Apply(ReferenceInputs* in) const {
  const uint8_t* w = w_host_.data() + w_offset_;
  const float* s = scales_host_.data() + scale_offset_;
  const int64_t head_stride = w_head_stride_, row_stride = w_row_stride_;
  const int64_t scale_stride = scale_head_stride_;
  in->w_uv = nullptr;
  in->w_uv_fp8 = [=](int h, int k, int d) { return w[h * head_stride + d * row_stride + k]; };
  in->w_uv_scale = [=](int h, int j) { return s[h * scale_stride + j]; };
}

absl::StatusOr<std::unique_ptr<Fp8Output>> Fp8Output::Create(const mla_tail::TailShape& shape,
                                                             bool head_major, int guard_rows) {
  Fp8OutputOptions options;
  options.head_major = head_major;
  options.guard_rows = guard_rows;
  return Create(shape, options);
}

absl::StatusOr<std::unique_ptr<Fp8Output>> Fp8Output::Create(const mla_tail::TailShape& shape,
                                                             const Fp8OutputOptions& options) {
  if (options.scale_spacing < 1 || options.guard_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("scale_spacing = ", options.scale_spacing,
                                                   ", guard_rows = ", options.guard_rows));
  }
  std::unique_ptr<Fp8Output> o(new Fp8Output());
  o->shape_ = shape;
  o->guard_rows_ = options.guard_rows;
  const int64_t all_rows = int64_t{shape.rows} + options.guard_rows;
  o->row_stride_ = int64_t{shape.heads} * kValueDim + 16;  // a multiple of 16
  if (options.head_major) {
    o->scale_row_stride_ = options.scale_spacing;
    o->scale_head_stride_ = all_rows * options.scale_spacing + 4;
    o->scale_count_ = size_t(shape.heads) * o->scale_head_stride_;
  } else {
    o->scale_row_stride_ = shape.heads * options.scale_spacing + 3;
    o->scale_head_stride_ = options.scale_spacing;
    o->scale_count_ = size_t(all_rows) * o->scale_row_stride_;
  }
  // The leading guards: two rows of values, 16 bytes of scales (alignment kept).
  o->value_offset_ = 2 * o->row_stride_;
  o->scale_offset_ = 16 / sizeof(float);
  MLA_RETURN_IF_ERROR(o->values_.Reset(size_t(o->value_offset_ + all_rows * o->row_stride_)));
  MLA_RETURN_IF_ERROR(o->scales_.Reset((o->scale_offset_ + o->scale_count_) * sizeof(float)));
  MLA_RETURN_IF_ERROR(o->Poison(nullptr));
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(nullptr), "poison");
  return o;
}

void Fp8Output::Apply(mla_tail::TailBuffers* b) const {
  b->output = nullptr;
  b->output_fp8 = values_.as<mla_tail::fp8_e4m3>() + value_offset_;
  b->output_row_stride = row_stride_;
  b->output_scale = scales_.as<float>() + scale_offset_;
  b->output_scale_row_stride = scale_row_stride_;
  b->output_scale_head_stride = scale_head_stride_;
}

absl::Status Fp8Output::Poison(cudaStream_t stream, Fp8Fill fill) const {
  fill_ = fill;
  char* const values = values_.as<char>();
  char* const scales = scales_.as<char>();
  const size_t scale_guard = scale_offset_ * sizeof(float);
  MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(values, kGuardByte, value_offset_, stream),
                           "e4m3 output guard");
  MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(values + value_offset_, fill.value_byte,
                                           values_.bytes() - value_offset_, stream),
                           "poison e4m3 output");
  MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(scales, kGuardByte, scale_guard, stream),
                           "output scale guard");
  return mla_tail::internal::CudaStatus(
      cudaMemsetAsync(scales + scale_guard, fill.scale_byte, scales_.bytes() - scale_guard, stream),
      "poison output scales");
}

absl::StatusOr<Fp8OutputBits> Fp8Output::Read() const {
  Fp8OutputBits bits;
  absl::StatusOr<std::vector<uint8_t>> values = Download<uint8_t>(values_);
  if (!values.ok()) return values.status();
  absl::StatusOr<std::vector<uint32_t>> scales = Download<uint32_t>(scales_);
  if (!scales.ok()) return scales.status();
  bits.values = *std::move(values);
  bits.scales = *std::move(scales);
  bits.value_offset = value_offset_;
  bits.row_stride = row_stride_;
  bits.scale_offset = scale_offset_;
  bits.scale_row_stride = scale_row_stride_;
  bits.scale_head_stride = scale_head_stride_;
  return bits;
}

std::string Fp8Output::CheckGuards(const Fp8OutputBits& bits) const {
  constexpr uint32_t kGuardWord = 0x01010101u * kGuardByte;
  for (int64_t i = 0; i < value_offset_; ++i) {
    if (bits.values[i] != kGuardByte) {
      return absl::StrCat("\n  the guard before the e4m3 output was written at byte ", i, ": 0x",
                          absl::Hex(bits.values[i]));
    }
  }
  for (int64_t i = 0; i < scale_offset_; ++i) {
    if (bits.scales[i] != kGuardWord) {
      return absl::StrCat("\n  the guard before the output scales was written at entry ", i, ": 0x",
                          absl::Hex(bits.scales[i]));
    }
  }
  return "";
}

absl::Status Fp8Output::Check(const std::function<uint16_t(int t, int column)>& bf16,
                              int live_rows) const {
  absl::StatusOr<Fp8OutputBits> bits = Read();
  if (!bits.ok()) return bits.status();
  const uint8_t* const values = bits->values.data() + value_offset_;
  const uint32_t* const scales = bits->scales.data() + scale_offset_;
  const uint32_t fill_word = 0x01010101u * fill_.scale_byte;
  const int heads = shape_.heads, rows = shape_.rows;
  const int live = live_rows >= 0 ? std::min(live_rows, rows) : rows;
  const int64_t width = int64_t{heads} * kValueDim;
  std::string errors = CheckGuards(*bits);
  int error_count = errors.empty() ? 0 : 1;
  auto report = [&](const std::string& what) {
    if (++error_count <= 8) absl::StrAppend(&errors, "\n  ", what);
  };
  std::vector<bool> scale_used(scale_count_, false);
  for (int t = 0; t < live; ++t) {
    for (int h = 0; h < heads; ++h) {
      uint16_t x[kValueDim];
      for (int d = 0; d < kValueDim; ++d) x[d] = bf16(t, h * kValueDim + d);
      const QuantizedHead want = QuantizeHead(x);
      const size_t s = size_t(t) * scale_row_stride_ + size_t(h) * scale_head_stride_;
      scale_used[s] = true;
      const uint32_t got_scale = scales[s];
      const bool scale_ok = std::isnan(want.scale) ? (got_scale & 0x7fffffffu) > 0x7f800000u
                                                   : got_scale == FloatBitsOf(want.scale);
      if (!scale_ok) {
        report(absl::StrCat("row ", t, " head ", h, ": scale bits 0x", absl::Hex(got_scale),
                            ", expected ", want.scale, " (bits 0x",
                            absl::Hex(FloatBitsOf(want.scale)), ")"));
      }
      for (int d = 0; d < kValueDim; ++d) {
        const uint8_t got = values[t * row_stride_ + h * kValueDim + d];
        const uint8_t expected = want.values[d];
        if (got == expected || (E4m3IsNan(got) && E4m3IsNan(expected))) continue;
        report(absl::StrCat("row ", t, " head ", h, " column ", d, ": got 0x", absl::Hex(got),
                            ", expected 0x", absl::Hex(expected), " (bf16 0x", absl::Hex(x[d]),
                            ", scale ", want.scale, ")"));
      }
    }
  }
  for (int t = 0; t < rows + guard_rows_; ++t) {
    for (int64_t c = (t < live ? width : 0); c < row_stride_; ++c) {
      if (values[t * row_stride_ + c] != fill_.value_byte) {
        report(absl::StrCat("row ", t, " column ", c, " was overwritten: 0x",
                            absl::Hex(values[t * row_stride_ + c])));
      }
    }
  }
  for (size_t s = 0; s < scale_count_; ++s) {
    if (!scale_used[s] && scales[s] != fill_word) {
      report(absl::StrCat("scale entry ", s, " (outside the live batch) was overwritten: 0x",
                          absl::Hex(scales[s])));
    }
  }
  if (error_count == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(error_count, " e4m3 output mismatches (heads ", heads,
                                          ", rows ", rows, "):", errors));
}

absl::Status Fp8Output::CheckUntouched() const {
  absl::StatusOr<Fp8OutputBits> bits = Read();
  if (!bits.ok()) return bits.status();
  const std::string guards = CheckGuards(*bits);
  if (!guards.empty()) return absl::InternalError(guards.substr(3));
  const uint32_t fill_word = 0x01010101u * fill_.scale_byte;
  for (size_t i = value_offset_; i < bits->values.size(); ++i) {
    if (bits->values[i] != fill_.value_byte) {
      return absl::InternalError(absl::StrCat("the e4m3 output was written at byte ",
                                              i - value_offset_, ": 0x",
                                              absl::Hex(bits->values[i])));
    }
  }
  for (size_t i = scale_offset_; i < bits->scales.size(); ++i) {
    if (bits->scales[i] != fill_word) {
      return absl::InternalError(absl::StrCat("the output scales were written at entry ",
                                              i - scale_offset_, ": 0x",
                                              absl::Hex(bits->scales[i])));
    }
  }
  return absl::OkStatus();
}

}  // namespace mla_tail_testing

#include "testing/support/problem.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/fill.h"

namespace mla_tail_testing {

using mla_tail::bf16;
using mla_tail::kLatentDim;
using mla_tail::kValueDim;

absl::StatusOr<DeviceMemory> DeviceMemory::Allocate(size_t bytes) {
  DeviceMemory memory;
  MLA_RETURN_IF_CUDA_ERROR(cudaMalloc(&memory.pointer_, bytes),
                           absl::StrCat("cudaMalloc(", bytes, ")"));
  memory.bytes_ = bytes;
  return memory;
}

absl::Status DeviceMemory::Reset(size_t bytes) {
  absl::StatusOr<DeviceMemory> m = Allocate(bytes);
  *this = m.ok() ? *std::move(m) : DeviceMemory();
  return m.status();
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    if (pointer_ != nullptr) cudaFree(pointer_);
    pointer_ = other.pointer_;
    bytes_ = other.bytes_;
    other.pointer_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceMemory::~DeviceMemory() {
  if (pointer_ != nullptr) cudaFree(pointer_);
}

absl::StatusOr<std::vector<uint16_t>> DownloadBits(const bf16* device, size_t elements) {
  std::vector<uint16_t> host(elements);
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(host.data(), device, elements * sizeof(uint16_t), cudaMemcpyDeviceToHost),
      "cudaMemcpy(download)");
  return host;
}

namespace {

absl::StatusOr<std::vector<uint16_t>> DownloadAll(const DeviceMemory& memory) {
  return DownloadBits(memory.as<bf16>(), memory.bytes() / sizeof(uint16_t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Problem>> Problem::Create(const ProblemOptions& options,
                                                         cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(mla_tail::ValidateShape(options.shape));
  if (options.w_row_padding < 0 || options.w_row_padding % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("w_row_padding = ", options.w_row_padding, " is not a multiple of 8"));
  }
  std::unique_ptr<Problem> p(new Problem(options));
  const int64_t heads = options.shape.heads, rows = options.shape.rows, q = options.shape.q;
  const int64_t width = heads * kValueDim;

  mla_tail::TailBuffers& b = p->buffers_;
  b.latent_row_stride = heads * kLatentDim + options.row_padding;
  // A padded gate's rows 16 elements further apart than the output's: a kernel that addresses
  // one with the other's stride shows.
  b.gate_row_stride = width + options.row_padding + (options.row_padding > 0 ? 16 : 0);
  b.output_row_stride = width + options.row_padding;
  b.w_row_stride = kLatentDim + options.w_row_padding;
  b.w_head_stride = int64_t{options.kv_b_proj_view ? 256 : 128} * b.w_row_stride;
  // The V half of kv_b_proj starts 128 rows into each head.
  p->w_allocation_offset_ = options.kv_b_proj_view ? int64_t{kValueDim} * b.w_row_stride : 0;

  MLA_RETURN_IF_ERROR(p->latent_.Reset(rows * b.latent_row_stride * sizeof(bf16)));
  MLA_RETURN_IF_ERROR(p->w_uv_.Reset(heads * b.w_head_stride * sizeof(bf16)));
  MLA_RETURN_IF_ERROR(p->gate_.Reset(rows * b.gate_row_stride * sizeof(bf16)));
  MLA_RETURN_IF_ERROR(p->lengths_device_.Reset((rows / q) * sizeof(int32_t)));
  p->output_lead_ = (2 * b.output_row_stride + 127) / 128 * 128;
  MLA_RETURN_IF_ERROR(p->output_.Reset((p->output_lead_ + p->output_elements()) * sizeof(bf16)));
  b.output = p->output_.as<bf16>() + p->output_lead_;  // PoisonOutput and Check know it by this

  // Unused parts of strided inputs hold NaN: a kernel that reads them shows it.
  for (DeviceMemory* m : {&p->latent_, &p->w_uv_, &p->gate_}) {
    MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(m->get(), 0xff, m->bytes(), stream), "cudaMemset");
  }
  bf16* const latent = p->latent_.as<bf16>();
  bf16* const w_uv = p->w_uv_.as<bf16>() + p->w_allocation_offset_;
  bf16* const gate = p->gate_.as<bf16>();
  MLA_RETURN_IF_CUDA_ERROR(FillTestValues({reinterpret_cast<uint16_t*>(latent), rows, heads,
                                           kLatentDim, b.latent_row_stride, kLatentDim},
                                          LatentSeed(options), options.data, stream),
                           "fill latent");
  MLA_RETURN_IF_CUDA_ERROR(FillTestValues({reinterpret_cast<uint16_t*>(w_uv), heads, kValueDim,
                                           kLatentDim, b.w_head_stride, b.w_row_stride},
                                          WeightSeed(options), options.data, stream),
                           "fill w_uv");
  MLA_RETURN_IF_CUDA_ERROR(
      FillTestValues({reinterpret_cast<uint16_t*>(gate), rows, 1, width, b.gate_row_stride, 0},
                     GateSeed(options), options.gates, stream),
      "fill gate");

  p->lengths_ = ProblemLengths(options);
  for (int64_t r = 0; r < rows / q; ++r) {
    if (p->lengths_[r] > 0) continue;
    // Padded and finished requests may hold garbage: NaN in latent and gate.
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemset2DAsync(latent + r * q * b.latent_row_stride, b.latent_row_stride * sizeof(bf16),
                          0xff, heads * kLatentDim * sizeof(bf16), q, stream),
        "poison latent");
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemset2DAsync(gate + r * q * b.gate_row_stride, b.gate_row_stride * sizeof(bf16), 0xff,
                          width * sizeof(bf16), q, stream),
        "poison gate");
  }
  const std::vector<SpecialValue> specials = SpecialValues(options);
  for (const SpecialValue& s : specials) {
    bf16* at = nullptr;
    switch (s.tensor) {
      case SpecialValue::kLatent:
        at = latent + s.i * b.latent_row_stride + s.j * kLatentDim + s.k;
        p->nan_latent_.insert({s.i, s.j});
        break;
      case SpecialValue::kWeight:
        at = w_uv + s.i * b.w_head_stride + s.k * b.w_row_stride + s.j;
        p->nan_weight_.insert({s.i, s.k});
        break;
      case SpecialValue::kGate:
        at = gate + s.i * b.gate_row_stride + s.j;
        if ((s.bits & 0x7fff) > 0x7f80) p->nan_gate_.insert({s.i, s.j});
        break;
    }
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(at, &s.bits, sizeof(s.bits), cudaMemcpyHostToDevice, stream),
        "special value");
  }
  MLA_RETURN_IF_ERROR(p->SetLengths(p->lengths_, stream));
  MLA_RETURN_IF_ERROR(p->PoisonOutput(b.output, stream));
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "problem set-up");

  b.latent = latent;
  b.w_uv = w_uv;
  b.gate = options.gated ? gate : nullptr;
  b.lengths = p->lengths_device_.as<int32_t>();

  absl::StatusOr<std::vector<uint16_t>> latent_host = DownloadAll(p->latent_);
  if (!latent_host.ok()) return latent_host.status();
  p->latent_host_ = *std::move(latent_host);
  absl::StatusOr<std::vector<uint16_t>> w_uv_host = DownloadAll(p->w_uv_);
  if (!w_uv_host.ok()) return w_uv_host.status();
  p->w_uv_host_ = *std::move(w_uv_host);
  absl::StatusOr<std::vector<uint16_t>> gate_host = DownloadAll(p->gate_);
  if (!gate_host.ok()) return gate_host.status();
  p->gate_host_ = *std::move(gate_host);
  return p;
}

size_t Problem::output_elements() const {
  return static_cast<size_t>(options_.shape.rows + options_.guard_rows) *
         static_cast<size_t>(options_.shape.heads * kValueDim + options_.row_padding);
}

mla_tail::TailBuffers Problem::buffers_with_output(bf16* output) const {
  mla_tail::TailBuffers b = buffers_;
  b.output = output;
  return b;
}

absl::StatusOr<DeviceMemory> Problem::NewOutput(cudaStream_t stream) const {
  absl::StatusOr<DeviceMemory> m = DeviceMemory::Allocate(output_elements() * sizeof(uint16_t));
  if (!m.ok()) return m.status();
  if (absl::Status s = PoisonOutput(m->as<bf16>(), stream); !s.ok()) return s;
  return m;
}

absl::Status Problem::PoisonOutput(bf16* output, cudaStream_t stream) const {
  const int64_t lead = output == buffers_.output ? output_lead_ : 0;
  return mla_tail::internal::CudaStatus(
      cudaMemsetAsync(output - lead, 0xff, (lead + output_elements()) * sizeof(bf16), stream),
      "poison output");
}

absl::Status Problem::SetLengths(const std::vector<int32_t>& lengths, cudaStream_t stream) {
  if (lengths.size() != lengths_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lengths has ", lengths.size(), " requests, the problem ", lengths_.size()));
  }
  lengths_ = lengths;
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(lengths_device_.get(), lengths_.data(), lengths_.size() * sizeof(int32_t),
                      cudaMemcpyHostToDevice, stream),
      "upload lengths");
  return mla_tail::internal::CudaStatus(cudaStreamSynchronize(stream), "upload lengths");
}

ReferenceInputs Problem::reference_inputs() const {
  ReferenceInputs in;
  in.heads = options_.shape.heads;
  in.q = options_.shape.q;
  const mla_tail::TailBuffers b = buffers_;
  const uint16_t* latent = latent_host_.data();
  const uint16_t* w_uv = w_uv_host_.data() + w_allocation_offset_;
  const uint16_t* gate = gate_host_.data();
  in.latent = [=](int t, int h, int k) {
    return latent[t * b.latent_row_stride + h * kLatentDim + k];
  };
  in.w_uv = [=](int h, int k, int d) { return w_uv[h * b.w_head_stride + d * b.w_row_stride + k]; };
  if (b.gate != nullptr) {
    in.gate = [=](int t, int column) { return gate[t * b.gate_row_stride + column]; };
  }
  const std::vector<int32_t>* lengths = &lengths_;
  in.lengths = [lengths](int request) { return (*lengths)[request]; };
  return in;
}

std::vector<int> Problem::SampleRows(int random_rows) const {
  return mla_tail_testing::SampleRows(options_, random_rows);
}

bool Problem::NanExpected(int64_t t, int64_t column) const {
  return nan_latent_.count({t, column / kValueDim}) > 0 ||
         nan_weight_.count({column / kValueDim, column % kValueDim}) > 0 ||
         nan_gate_.count({t, column}) > 0;
}

absl::Status Problem::Check(const bf16* output, const std::vector<int>& sample, bool exact,
                            int live_rows) const {
  return Check(output, sample, exact, reference_inputs(), live_rows);
}

absl::Status Problem::Check(const bf16* output, const std::vector<int>& sample, bool exact,
                            const ReferenceInputs& in, int live_rows) const {
  const int live = live_rows >= 0 ? std::min(live_rows, options_.shape.rows) : options_.shape.rows;
  std::vector<int> rows;
  for (int t : sample) {
    if (t < live) rows.push_back(t);
  }
  absl::StatusOr<std::vector<uint16_t>> got = DownloadBits(output, output_elements());
  if (!got.ok()) return got.status();
  std::vector<uint16_t> before;  // the guard band before the problem's own output
  if (output == buffers_.output && output_lead_ > 0) {
    absl::StatusOr<std::vector<uint16_t>> lead = DownloadBits(output - output_lead_, output_lead_);
    if (!lead.ok()) return lead.status();
    before = *std::move(lead);
  }
  const int heads = options_.shape.heads;
  const int64_t width = int64_t{heads} * kValueDim;
  const int64_t stride = buffers_.output_row_stride;
  std::string errors;
  int error_count = 0;
  auto report = [&](const std::string& what) {
    if (++error_count <= 8) absl::StrAppend(&errors, "\n  ", what);
  };

  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i] != 0xffff) {
      report(absl::StrCat("element ", static_cast<int64_t>(i) - output_lead_,
                          " (before the output) was overwritten"));
    }
  }
  for (int t = 0; t < options_.shape.rows + options_.guard_rows; ++t) {
    const bool in_batch = t < live;
    const bool active = in_batch && lengths_[t / options_.shape.q] > 0;
    for (int64_t c = 0; c < stride; ++c) {
      const uint16_t bits = (*got)[t * stride + c];
      if (!in_batch || c >= width) {
        if (bits != 0xffff) report(absl::StrCat("row ", t, " column ", c, " was overwritten"));
      } else if (!active && bits != 0) {
        report(absl::StrCat("inactive row ", t, " column ", c, " is not +0.0: ", bits));
      } else if (active && Bf16IsNan(bits) && !NanExpected(t, c) &&
                 !Bf16IsNan(ReferenceOutput(in, t, static_cast<int>(c / kValueDim),
                                            static_cast<int>(c % kValueDim))
                                .out)) {
        report(absl::StrCat("row ", t, " column ", c, " is NaN (unwritten?)"));
      }
    }
  }

  // The reference is the slow part: (row, head) pairs spread over the host's cores.
  const int pairs = static_cast<int>(rows.size()) * heads;
  std::atomic<int> next{0};
  std::mutex mutex;
  auto work = [&] {
    for (int i = next++; i < pairs; i = next++) {
      const int t = rows[i / heads], h = i % heads;
      for (int d = 0; d < kValueDim; ++d) {
        const ReferenceElement ref = ReferenceOutput(in, t, h, d);
        std::string why;
        if (!OutputAgrees(ref, (*got)[t * stride + h * kValueDim + d], exact, &why)) {
          std::lock_guard<std::mutex> lock(mutex);
          report(absl::StrCat("row ", t, " head ", h, " column ", d, ": ", why));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  const int count = std::clamp<int>(std::thread::hardware_concurrency(), 1, 32);
  for (int i = 0; i < std::min(count, pairs); ++i) threads.emplace_back(work);
  for (std::thread& thread : threads) thread.join();
  if (error_count == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(error_count, " mismatches (heads ", heads, ", rows ",
                                          options_.shape.rows, ", q ", options_.shape.q,
                                          "):", errors));
}

}  // namespace mla_tail_testing

#include "testing/support/late_inputs.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>
#include <utility>

#include "mla_tail/mla/tail_args.h"
#include "testing/support/late_writer.h"

namespace mla_tail_testing {

absl::StatusOr<LateInputs> LateInputs::Save(const Problem& problem, cudaStream_t stream) {
  const mla_tail::TailBuffers b = problem.buffers();
  const int rows = problem.shape().rows;
  LateInputs late;
  late.latent_bytes = size_t(rows) * b.latent_row_stride * 2;
  late.gate_bytes = b.gate == nullptr ? 0 : size_t(rows) * b.gate_row_stride * 2;  // none without
  late.lengths_bytes = size_t(rows / problem.shape().q) * 4;  // a length a request
  absl::StatusOr<DeviceMemory> saved =
      DeviceMemory::Allocate(late.latent_bytes + late.gate_bytes + late.lengths_bytes);
  if (!saved.ok()) return saved.status();
  late.saved = *std::move(saved);
  char* s = late.saved.as<char>();
  for (const auto& [dst, src, bytes] :
       {std::tuple{s, static_cast<const void*>(b.latent), late.latent_bytes},
        {s + late.latent_bytes, b.gate, late.gate_bytes},
        {s + late.latent_bytes + late.gate_bytes, b.lengths, late.lengths_bytes}}) {
    // On the test's stream: a device-to-device cudaMemcpy returns before it has copied, and the
    // legacy stream it runs on is not ordered with a non-blocking stream's Spoil.
    if (bytes == 0) continue;
    if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) {
      return absl::InternalError("saving the inputs");
    }
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) return absl::InternalError("saving the inputs");
  return late;
}

absl::Status LateInputs::Spoil(const Problem& problem, cudaStream_t stream) const {
  const mla_tail::TailBuffers b = problem.buffers();
  if (cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.latent), 0xff, latent_bytes, stream) ||
      (gate_bytes > 0 &&
       cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.gate), 0xff, gate_bytes, stream)) ||
      cudaMemsetAsync(const_cast<int32_t*>(b.lengths), 0, lengths_bytes, stream)) {
    return absl::InternalError("spoiling the inputs");
  }
  return absl::OkStatus();
}

cudaError_t LateInputs::LaunchWriter(const Problem& problem, cudaStream_t stream) const {
  const mla_tail::TailBuffers b = problem.buffers();
  const char* s = saved.as<char>();
  const LateCopy copies[3] = {
      {s, const_cast<mla_tail::bf16*>(b.latent), latent_bytes},
      {s + latent_bytes, const_cast<mla_tail::bf16*>(b.gate), gate_bytes},
      {s + latent_bytes + gate_bytes, const_cast<int32_t*>(b.lengths), lengths_bytes}};
  return LaunchLateWriter(copies, 50000, stream);
}

}  // namespace mla_tail_testing

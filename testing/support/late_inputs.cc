#include "testing/support/late_inputs.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>
#include <utility>

#include "mla_tail/mla/tail_args.h"
#include "testing/support/late_writer.h"

namespace mla_tail_testing {

absl::StatusOr<LateInputs> LateInputs::Save(const Problem& problem, cudaStream_t stream) {
  return SaveInputs(problem, /*has_count=*/false, 0, stream);
}

absl::StatusOr<LateInputs> LateInputs::SaveWithCount(const Problem& problem, int32_t count,
                                                     cudaStream_t stream) {
  return SaveInputs(problem, /*has_count=*/true, count, stream);
}

absl::StatusOr<LateInputs> LateInputs::SaveInputs(const Problem& problem, bool has_count,
                                                  int32_t count, cudaStream_t stream) {
  const mla_tail::TailBuffers b = problem.buffers();
  const int rows = problem.shape().rows;
  LateInputs late;
  late.has_count = has_count;
  late.count = count;
  late.latent_bytes = size_t(rows) * b.latent_row_stride * 2;
  late.gate_bytes = b.gate == nullptr ? 0 : size_t(rows) * b.gate_row_stride * 2;  // none without
  late.lengths_bytes = size_t(rows / problem.shape().q) * 4;  // a length a request
  const size_t count_bytes = has_count ? sizeof(int32_t) : 0;
  absl::StatusOr<DeviceMemory> saved = DeviceMemory::Allocate(late.latent_bytes + late.gate_bytes +
                                                              late.lengths_bytes + count_bytes);
  if (!saved.ok()) return saved.status();
  late.saved = *std::move(saved);
  if (has_count) {
    absl::StatusOr<DeviceMemory> target = DeviceMemory::Allocate(late.lengths_bytes + count_bytes);
    if (!target.ok()) return target.status();
    late.lengths_and_count = *std::move(target);
  }
  char* s = late.saved.as<char>();
  char* const saved_lengths = s + late.latent_bytes + late.gate_bytes;
  for (const auto& [dst, src, bytes] :
       {std::tuple{s, static_cast<const void*>(b.latent), late.latent_bytes},
        {s + late.latent_bytes, b.gate, late.gate_bytes},
        {saved_lengths, b.lengths, late.lengths_bytes}}) {
    // On the test's stream: a device-to-device cudaMemcpy returns before it has copied, and the
    // legacy stream it runs on is not ordered with a non-blocking stream's Spoil.
    if (bytes == 0) continue;
    if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) {
      return absl::InternalError("saving the inputs");
    }
  }
  if (has_count) {
    // The count after the saved lengths, then both where the tail reads them (so that a run
    // without Spoil sees the true values).
    if (cudaMemcpyAsync(saved_lengths + late.lengths_bytes, &count, sizeof(count),
                        cudaMemcpyHostToDevice, stream) != cudaSuccess ||
        cudaMemcpyAsync(late.lengths_and_count.get(), saved_lengths,
                        late.lengths_bytes + count_bytes, cudaMemcpyDeviceToDevice,
                        stream) != cudaSuccess) {
      return absl::InternalError("saving the count");
    }
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) return absl::InternalError("saving the inputs");
  return late;
}

int32_t* LateInputs::lengths_target(const Problem& problem) const {
  return has_count ? lengths_and_count.as<int32_t>()
                   : const_cast<int32_t*>(problem.buffers().lengths);
}

mla_tail::TailBuffers LateInputs::buffers(const Problem& problem) const {
  mla_tail::TailBuffers b = problem.buffers();
  if (has_count) {
    b.lengths = lengths_and_count.as<int32_t>();
    b.row_count = lengths_and_count.as<int32_t>() + lengths_bytes / sizeof(int32_t);
    b.row_count_before_upstream = false;
  }
  return b;
}

absl::Status LateInputs::Spoil(const Problem& problem, cudaStream_t stream,
                               int32_t spoiled_count) const {
  const mla_tail::TailBuffers b = problem.buffers();
  int32_t* const lengths = lengths_target(problem);
  if (cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.latent), 0xff, latent_bytes, stream) ||
      (gate_bytes > 0 &&
       cudaMemsetAsync(const_cast<mla_tail::bf16*>(b.gate), 0xff, gate_bytes, stream)) ||
      cudaMemsetAsync(lengths, 0, lengths_bytes, stream)) {
    return absl::InternalError("spoiling the inputs");
  }
  if (has_count) {
    // Waits for the copy: its source is this call's argument.
    if (cudaMemcpyAsync(lengths + lengths_bytes / sizeof(int32_t), &spoiled_count,
                        sizeof(spoiled_count), cudaMemcpyHostToDevice, stream) != cudaSuccess ||
        cudaStreamSynchronize(stream) != cudaSuccess) {
      return absl::InternalError("spoiling the count");
    }
  }
  return absl::OkStatus();
}

cudaError_t LateInputs::LaunchWriter(const Problem& problem, cudaStream_t stream) const {
  const mla_tail::TailBuffers b = problem.buffers();
  const char* s = saved.as<char>();
  // With a count, the third copy writes the lengths and the count after them.
  const LateCopy copies[3] = {{s, const_cast<mla_tail::bf16*>(b.latent), latent_bytes},
                              {s + latent_bytes, const_cast<mla_tail::bf16*>(b.gate), gate_bytes},
                              {s + latent_bytes + gate_bytes, lengths_target(problem),
                               lengths_bytes + (has_count ? sizeof(int32_t) : 0)}};
  return LaunchLateWriter(copies, 50000, stream);
}

}  // namespace mla_tail_testing

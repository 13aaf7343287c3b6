#include "mla_tail/mla/padding.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/pointer_checks.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {

absl::Status ZeroPaddingLengths(int32_t* lengths, int rows, int bucket_rows, int q,
                                cudaStream_t stream) {
  internal::CudaErrorScope errors;
  if (lengths == nullptr) return absl::InvalidArgumentError("lengths is null");
  if (reinterpret_cast<uintptr_t>(lengths) % alignof(int32_t) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat("lengths = %p is not %d-byte aligned",
                                                      static_cast<const void*>(lengths), 4));
  }
  if (q < 1 || q > kMaxQ || rows < 0 || bucket_rows > kMaxRows || rows % q != 0 ||
      bucket_rows % q != 0 || rows > bucket_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ZeroPaddingLengths: rows = ", rows, ", bucket_rows = ", bucket_rows, ", q = ", q,
        " (q in [1, ", kMaxQ, "], rows <= bucket_rows <= ", kMaxRows, ", both multiples of q)"));
  }
  if (rows == bucket_rows) return absl::OkStatus();
  // The device whose memory `lengths` is (the current device for host or managed memory).
  int device = -1;
  {
    // Queries, legal while another thread captures, in relaxed mode as every query of the
    // library's is.
    internal::RelaxedCaptureMode relaxed;
    MLA_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device), "cudaGetDevice");
    cudaPointerAttributes attributes = {};
    if (cudaPointerGetAttributes(&attributes, lengths) == cudaSuccess &&
        attributes.type == cudaMemoryTypeDevice) {
      device = attributes.device;
    }
  }
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device));
  const auto begin =
      reinterpret_cast<uintptr_t>(lengths) + static_cast<uintptr_t>(rows / q) * sizeof(int32_t);
  const internal::Extent padding{
      "lengths", begin, begin + static_cast<uintptr_t>((bucket_rows - rows) / q) * sizeof(int32_t)};
  MLA_RETURN_IF_ERROR(
      internal::CheckExtents(device, {&padding, 1}, internal::PointerCheck::kCached));
  if (stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread) {
    absl::StatusOr<bool> capturing = internal::IsCapturing(stream);
    if (!capturing.ok()) return capturing.status();
    int stream_device = device;
    if (!*capturing) {
      MLA_RETURN_IF_CUDA_ERROR(cudaStreamGetDevice(stream, &stream_device), "cudaStreamGetDevice");
    }
    if (stream_device != device) {
      return absl::InvalidArgumentError(absl::StrCat("stream belongs to device ", stream_device,
                                                     "; lengths is memory of device ", device));
    }
  }
  return internal::OnCallersCapture(internal::CudaStatus(
      cudaMemsetAsync(lengths + rows / q, 0, size_t(bucket_rows - rows) / q * sizeof(int32_t),
                      stream),
      "cudaMemsetAsync(padding lengths)"));
}

}  // namespace mla_tail

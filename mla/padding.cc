#include "mla_tail/mla/padding.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/driver.h"
#include "mla/internal/pointer_checks.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {
namespace {

// The ordinal of the device whose memory `p` is (device memory, not managed), from the driver;
// nullopt otherwise or where the driver cannot tell. Makes and binds no context.
std::optional<int> DeviceOfMemory(const void* p) {
  const internal::DriverApi& driver = internal::Driver();
  if (driver.pointer_get_attributes == nullptr) return std::nullopt;
  CUmemorytype type = static_cast<CUmemorytype>(0);
  int ordinal = -1;
  unsigned int managed = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* data[] = {&type, &ordinal, &managed};
  if (driver.pointer_get_attributes(3, attributes, data, reinterpret_cast<CUdeviceptr>(p)) !=
          CUDA_SUCCESS ||
      type != CU_MEMORYTYPE_DEVICE || managed != 0 || ordinal < 0) {
    return std::nullopt;
  }
  return ordinal;
}

}  // namespace

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
  // The device whose memory `lengths` is, asked of the driver (a runtime query would make the
  // current device's primary context current on a thread that has none); for host or managed
  // memory, or memory the driver cannot place, the runtime's current device (cudaGetDevice makes
  // no context).
  int device = -1;
  MLA_RETURN_IF_CUDA_ERROR(cudaGetDevice(&device), "cudaGetDevice");
  if (const std::optional<int> owner = DeviceOfMemory(lengths)) device = *owner;
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
    if (!capturing.ok()) return internal::OnCallersCapture(capturing.status());
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

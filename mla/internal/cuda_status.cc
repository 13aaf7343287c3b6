#include "mla/internal/cuda_status.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "mla_tail/mla/errors.h"

namespace mla_tail::internal {
namespace {

absl::StatusCode CodeOf(cudaError_t error) {
  if (IsStickyCudaError(error)) return absl::StatusCode::kDataLoss;
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidResourceHandle:  // a stream or graph handle of the caller's
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
      return absl::StatusCode::kAborted;
    default:
      // cudaErrorInvalidValue included: every argument the caller gave was validated before
      // any CUDA call, so an invalid value is the library's fault, not the caller's.
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const bool sticky = IsStickyCudaError(error);
  absl::Status status(
      CodeOf(error),
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")",
                   sticky ? "; sticky: the CUDA context of this process is lost" : ""));
  status.SetPayload(kCudaErrorPayloadUrl, absl::Cord(absl::StrCat(static_cast<int>(error))));
  return status;
}

absl::Status CheckDevice(int device) {
  CudaErrorScope errors;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device: cudaGetDeviceCount returned ",
                     error == cudaSuccess ? "0 devices" : cudaGetErrorName(error)));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", device, " does not exist (", count, " devices)"));
  }
  int major = 0, minor = 0;
  MLA_RETURN_IF_CUDA_ERROR(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
      "cudaDeviceGetAttribute(major)");
  MLA_RETURN_IF_CUDA_ERROR(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
      "cudaDeviceGetAttribute(minor)");
  if (major != 9 || minor != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device, " has compute capability ", major, ".", minor,
                     "; this build carries native sm_90 (Hopper) code only"));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> IsCapturing(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  return capture != cudaStreamCaptureStatusNone;
}

}  // namespace mla_tail::internal

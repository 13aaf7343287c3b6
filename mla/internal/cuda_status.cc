#include "mla/internal/cuda_status.h"

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "mla_tail/mla/errors.h"

namespace mla_tail::internal {
namespace {

bool IsCaptureError(cudaError_t error) {
  switch (error) {
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
      return true;
    default:
      return false;
  }
}

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
    // A GPU that exists but cannot be used: exclusive-process or prohibited compute mode, a
    // system not ready (an NVSwitch system without its fabric manager), a driver without the
    // forward-compatibility support it needs.
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::StatusCode::kFailedPrecondition;
    default:
      if (IsCaptureError(error)) return absl::StatusCode::kAborted;  // a capture of our own
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

namespace {

// CUDA's status for `error` with `code` in place of its own, unless it is OK or sticky (DataLoss
// stays): the message and CUDA's error are kept.
absl::Status CudaStatusAs(absl::StatusCode code, cudaError_t error, absl::string_view what) {
  absl::Status status = CudaStatus(error, what);
  if (status.ok() || status.code() == absl::StatusCode::kDataLoss) return status;
  absl::Status recoded(code, status.message());
  recoded.SetPayload(kCudaErrorPayloadUrl, *status.GetPayload(kCudaErrorPayloadUrl));
  return recoded;
}

}  // namespace

absl::Status CallersHandleStatus(cudaError_t error, absl::string_view what) {
  return CudaStatusAs(absl::StatusCode::kInvalidArgument, error, what);
}

absl::Status DriverStatus(CUresult result, absl::string_view what) {
  return CudaStatus(static_cast<cudaError_t>(result), what);
}

absl::Status CheckDevice(int device) {
  CudaErrorScope errors;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // No usable device, whatever CUDA's reason: FailedPrecondition, carrying CUDA's error.
    return CudaStatusAs(absl::StatusCode::kFailedPrecondition, error,
                        "no CUDA device: cudaGetDeviceCount");
  }
  if (count == 0) {
    return absl::FailedPreconditionError("no CUDA device: cudaGetDeviceCount returned 0 devices");
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

absl::Status OnCallersCapture(absl::Status status) {
  // Only Aborted is mapped: a capture error already mapped stays as it is.
  if (status.code() != absl::StatusCode::kAborted) return status;
  const std::optional<cudaError_t> error = CudaErrorOf(status);
  if (!error.has_value() || !IsCaptureError(*error)) return status;
  absl::Status caller(absl::StatusCode::kFailedPrecondition,
                      absl::StrCat(status.message(),
                                   "; a stream capture of the caller's (on this stream, or one "
                                   "this call conflicted with) is invalid: end it and capture "
                                   "anew"));
  caller.SetPayload(kCudaErrorPayloadUrl, *status.GetPayload(kCudaErrorPayloadUrl));
  return caller;
}

absl::StatusOr<bool> IsCapturing(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MLA_RETURN_IF_ERROR(CudaStatus(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing"));
  if (capture == cudaStreamCaptureStatusInvalidated) {
    return CudaStatus(cudaErrorStreamCaptureInvalidated,
                      "the stream's capture was invalidated before this call");
  }
  return capture != cudaStreamCaptureStatusNone;
}

}  // namespace mla_tail::internal

#include "mla/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace mla {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(error), " (",
                                           cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidResourceHandle:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
      return absl::FailedPreconditionError(message);
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
      return absl::AbortedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CheckDevice(int device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    // cudaGetDeviceCount leaves a sticky-free error; clear it for later calls.
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device: cudaGetDeviceCount returned ",
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

}  // namespace mla

#ifndef MLA_TAIL_MLA_INTERNAL_CUDA_STATUS_H_
#define MLA_TAIL_MLA_INTERNAL_CUDA_STATUS_H_

// CUDA errors as absl::Status (mla/errors.h says what each code means), and the two scopes every
// public entry point opens: one keeps the caller's CUDA error state, one keeps other threads'
// stream captures intact. Not part of the public API.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mla_tail/mla/errors.h"

namespace mla_tail::internal {

// OK for cudaSuccess; otherwise a status naming `what` and the CUDA error, carrying the
// cudaError_t (CudaErrorOf). Sticky errors become DataLoss.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// A CUDA error caused by a handle the caller gave (an executable graph, a node of another graph):
// InvalidArgument naming `what`, carrying the cudaError_t as CudaStatus does. Sticky errors stay
// DataLoss.
absl::Status CallersHandleStatus(cudaError_t error, absl::string_view what);

// A driver result as CudaStatus reports the runtime error of the same number (the runtime's
// codes mirror the driver's for every sticky error and for memory exhaustion).
absl::Status DriverStatus(CUresult result, absl::string_view what);

// Fails with FailedPrecondition unless `device` exists and is a Hopper-class (sm_90) GPU that
// runs this module's native code; InvalidArgument for a device number that does not exist.
absl::Status CheckDevice(int device);

// `status` of a call on a stream the caller is capturing: the capture errors CUDA reports there
// (the caller's capture was invalidated, by the caller's own work or another thread's) become
// FailedPrecondition, since retrying the call cannot help: the caller ends that capture and
// captures anew. Aborted stays for captures the library makes itself. Other statuses unchanged.
absl::Status OnCallersCapture(absl::Status status);

// Keeps the calling thread's CUDA error state as the caller left it: a failed runtime call of
// ours sets the thread's last error, and the scope clears it on exit unless the caller already
// had an error pending when the scope opened (then that slot is theirs, and is left alone).
class CudaErrorScope {
 public:
  CudaErrorScope() : caller_pending_(cudaPeekAtLastError() != cudaSuccess) {}
  ~CudaErrorScope() {
    if (!caller_pending_) cudaGetLastError();
  }
  CudaErrorScope(const CudaErrorScope&) = delete;
  CudaErrorScope& operator=(const CudaErrorScope&) = delete;

 private:
  bool caller_pending_;
};

// Puts the calling thread in cudaStreamCaptureModeRelaxed for a scope: another thread's Global
// capture then does not make our allocations, frees, kernel loads and instantiations fail or
// invalidate that capture. Nothing inside the scope synchronises the device or uses the legacy
// stream, which no mode makes safe.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&previous_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&previous_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

// Whether `stream` is capturing. The legacy default stream is never asked (a query of it while
// another thread captures a blocking stream would break that capture): it is taken as not
// capturing, and a launch into it during such a capture fails at the launch, as CUDA decides.
// An invalidated capture is a capture error (Aborted): a caller on the caller's own stream maps
// it with OnCallersCapture (FailedPrecondition), one on a capture of the library's keeps it.
absl::StatusOr<bool> IsCapturing(cudaStream_t stream);

}  // namespace mla_tail::internal

#define MLA_RETURN_IF_CUDA_ERROR(expr, what)                                           \
  do {                                                                                 \
    const absl::Status _mla_status = ::mla_tail::internal::CudaStatus((expr), (what)); \
    if (!_mla_status.ok()) return _mla_status;                                         \
  } while (false)

#define MLA_RETURN_IF_ERROR(expr) MLA_TAIL_RETURN_IF_ERROR(expr)

#endif  // MLA_TAIL_MLA_INTERNAL_CUDA_STATUS_H_

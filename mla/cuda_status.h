#ifndef MLA_CUDA_STATUS_H_
#define MLA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mla {

// OK for cudaSuccess; otherwise a status naming `what` and the CUDA error.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// Fails with FailedPrecondition unless `device` exists and is a Hopper-class (sm_90) GPU that
// runs this module's native code.
absl::Status CheckDevice(int device);

}  // namespace mla

#define MLA_RETURN_IF_CUDA_ERROR(expr, what)                      \
  do {                                                            \
    const absl::Status _mla_status = ::mla::CudaStatus((expr), (what)); \
    if (!_mla_status.ok()) return _mla_status;                    \
  } while (false)

#define MLA_RETURN_IF_ERROR(expr)                   \
  do {                                              \
    const absl::Status _mla_status = (expr);        \
    if (!_mla_status.ok()) return _mla_status;      \
  } while (false)

#endif  // MLA_CUDA_STATUS_H_

#include "mla/internal/device_guard.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/driver.h"

namespace mla_tail::internal {

absl::Status DeviceGuard::Enter(int device) {
  const DriverApi& driver = Driver();
  if (!driver.complete()) {
    return absl::InternalError("the CUDA driver lacks a function this library calls directly");
  }
  CUcontext current = nullptr;
  if (const CUresult r = driver.ctx_get_current(&current); r != CUDA_SUCCESS) {
    return CudaStatus(static_cast<cudaError_t>(r), "cuCtxGetCurrent");
  }
  if (current != nullptr) {
    CUdevice current_device = -1;
    if (const CUresult r = driver.ctx_get_device(&current_device); r != CUDA_SUCCESS) {
      return CudaStatus(static_cast<cudaError_t>(r), "cuCtxGetDevice");
    }
    if (current_device == device) return absl::OkStatus();
  } else {
    // No context yet: the runtime binds the primary context of its device at its next call.
    MLA_RETURN_IF_CUDA_ERROR(cudaGetDevice(&caller_device_), "cudaGetDevice");
    if (caller_device_ == device) return absl::OkStatus();
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  caller_context_ = current;
  switched_ = true;
  return absl::OkStatus();
}

DeviceGuard::~DeviceGuard() {
  if (!switched_) return;
  if (caller_context_ != nullptr) {
    Driver().ctx_set_current(caller_context_);
  } else {
    cudaSetDevice(caller_device_);
  }
}

}  // namespace mla_tail::internal

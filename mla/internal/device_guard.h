#ifndef MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_
#define MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "mla/internal/cuda_status.h"

namespace mla_tail::internal {

// Makes `device` current for a scope and restores the caller's device after it, so that an
// instance works on its own device whatever device the calling thread has current.
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != current_) cudaSetDevice(previous_);
  }

  absl::Status Enter(int device) {
    MLA_RETURN_IF_CUDA_ERROR(cudaGetDevice(&previous_), "cudaGetDevice");
    current_ = previous_;
    if (device != previous_) {
      MLA_RETURN_IF_CUDA_ERROR(cudaSetDevice(device), "cudaSetDevice");
      current_ = device;
    }
    return absl::OkStatus();
  }

 private:
  int previous_ = -1;
  int current_ = -1;
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

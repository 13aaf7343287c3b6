#ifndef MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_
#define MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

#include <cuda.h>

#include "absl/status/status.h"

namespace mla_tail::internal {

// Makes `device` current for a scope, so that an instance works on its own device whatever the
// calling thread has current, and leaves the thread as it found it:
// - a context of `device` already current (its primary context, a context the caller made, a
//   green context) stays current: the library's calls run in it;
// - otherwise the device's primary context is made current (cudaSetDevice), and on exit the
//   caller's context is made current again (cuCtxSetCurrent: a non-primary or green context of
//   another device comes back as it was), or, when the thread had none, the caller's device is
//   set again (cudaSetDevice).
class DeviceGuard {
 public:
  DeviceGuard() = default;
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard();

  absl::Status Enter(int device);

 private:
  bool switched_ = false;
  CUcontext caller_context_ = nullptr;  // null: the thread had no current context
  int caller_device_ = -1;              // the runtime's device, when it had none
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

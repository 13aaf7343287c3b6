#ifndef MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_
#define MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

#include <cuda.h>

#include "absl/status/status.h"

namespace mla_tail::internal {

// Makes `device` current for a scope, so that an instance works on its own device whatever the
// calling thread has current, and leaves the thread as it found it:
// - a context of `device` already current (its primary context, a context the caller made, a
//   green context) stays current: the library's calls run in it, with the caller's stream and
//   buffers of that context, and MlaTail::Create loads the kernels into it (docs/spec.md,
//   "Contexts": an instance is used in the context it was created in);
// - otherwise the device's primary context is made current (cuCtxSetCurrent; retained once for
//   the process, as the runtime keeps it), and on exit the caller's context is made current
//   again: a non-primary or green context of another device comes back as it was, and a thread
//   that had none has none again. The runtime's device of the thread (cudaSetDevice's) is never
//   changed, so no other device's primary context is made or bound.
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
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

#ifndef MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_
#define MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

#include <cuda.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mla_tail::internal {

struct ContextRef;

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
  // Makes `context` current for the scope (a context the library recorded as it made objects in
  // it, so that they are released there whatever the destroying thread has current); the
  // caller's context is made current again on exit. Never makes or retains a context.
  // FailedPrecondition, nothing changed, where that context is gone: destroyed, or its handle
  // now another context's (a new context may reuse a destroyed one's address, never its ID).
  absl::Status EnterContext(const ContextRef& context);

 private:
  // Makes `context` current, `caller` (the context current before) to be restored on exit.
  absl::Status Switch(CUcontext caller, CUcontext context);

  bool switched_ = false;
  CUcontext caller_context_ = nullptr;  // null: the thread had no current context
};

// A context as the library records it where it makes objects: its handle, and its ID
// (cuCtxGetId), unique for the process, by which a later context at the same address is told
// apart.
struct ContextRef {
  CUcontext handle = nullptr;
  unsigned long long id = 0;  // NOLINT(runtime/int): cuCtxGetId's type
};

// The context current on the calling thread (null: none), as the driver reports it.
absl::StatusOr<CUcontext> CurrentContext();

// The context current on the calling thread, with its ID; FailedPrecondition where none is.
absl::StatusOr<ContextRef> CurrentContextRef();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_DEVICE_GUARD_H_

#include "mla/internal/device_guard.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/driver.h"

namespace mla_tail::internal {

namespace {

// The primary context of `device`, retained on its first use and kept for the process (the
// runtime keeps its primary contexts too, so a release could only destroy one it uses).
absl::Status PrimaryContext(const DriverApi& driver, int device, CUcontext* context) {
  static std::mutex mutex;
  static auto* contexts = new std::vector<CUcontext>();  // by device; null: not retained yet
  std::lock_guard<std::mutex> lock(mutex);
  if (device < 0) return absl::InvalidArgumentError(absl::StrCat("device = ", device));
  if (static_cast<size_t>(device) < contexts->size() && (*contexts)[device] != nullptr) {
    *context = (*contexts)[device];
    return absl::OkStatus();
  }
  CUdevice handle = 0;
  if (const CUresult r = driver.device_get(&handle, device); r != CUDA_SUCCESS) {
    return DriverStatus(r, absl::StrCat("cuDeviceGet(", device, ")"));
  }
  if (const CUresult r = driver.device_primary_ctx_retain(context, handle); r != CUDA_SUCCESS) {
    return DriverStatus(r, absl::StrCat("cuDevicePrimaryCtxRetain(", device, ")"));
  }
  if (contexts->size() <= static_cast<size_t>(device)) contexts->resize(device + 1, nullptr);
  (*contexts)[device] = *context;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CUcontext> CurrentContext() {
  const DriverApi& driver = Driver();
  if (!driver.complete()) {
    return absl::InternalError("the CUDA driver lacks a function this library calls directly");
  }
  CUcontext current = nullptr;
  if (const CUresult r = driver.ctx_get_current(&current); r != CUDA_SUCCESS) {
    return DriverStatus(r, "cuCtxGetCurrent");
  }
  return current;
}

absl::StatusOr<ContextRef> CurrentContextRef() {
  absl::StatusOr<CUcontext> current = CurrentContext();
  if (!current.ok()) return current.status();
  if (*current == nullptr) {
    return absl::FailedPreconditionError("no CUDA context is current on this thread");
  }
  ContextRef ref;
  ref.handle = *current;
  if (const CUresult r = Driver().ctx_get_id(ref.handle, &ref.id); r != CUDA_SUCCESS) {
    return DriverStatus(r, "cuCtxGetId");
  }
  return ref;
}

absl::Status DeviceGuard::Enter(int device) {
  absl::StatusOr<CUcontext> current = CurrentContext();
  if (!current.ok()) return current.status();
  const DriverApi& driver = Driver();
  if (*current != nullptr) {
    CUdevice current_device = -1;
    if (const CUresult r = driver.ctx_get_device(&current_device); r != CUDA_SUCCESS) {
      return DriverStatus(r, "cuCtxGetDevice");
    }
    if (current_device == device) return absl::OkStatus();
  }
  CUcontext primary = nullptr;
  MLA_RETURN_IF_ERROR(PrimaryContext(driver, device, &primary));
  return Switch(*current, primary);
}

absl::Status DeviceGuard::EnterContext(const ContextRef& context) {
  absl::StatusOr<CUcontext> current = CurrentContext();
  if (!current.ok()) return current.status();
  unsigned long long id = 0;  // NOLINT(runtime/int): cuCtxGetId's type
  if (context.handle == nullptr || Driver().ctx_get_id(context.handle, &id) != CUDA_SUCCESS ||
      id != context.id) {
    return absl::FailedPreconditionError("the context the objects were made in is gone");
  }
  if (*current == context.handle) return absl::OkStatus();
  return Switch(*current, context.handle);
}

absl::Status DeviceGuard::Switch(CUcontext caller, CUcontext context) {
  if (const CUresult r = Driver().ctx_set_current(context); r != CUDA_SUCCESS) {
    return DriverStatus(r, "cuCtxSetCurrent");
  }
  caller_context_ = caller;
  switched_ = true;
  return absl::OkStatus();
}

DeviceGuard::~DeviceGuard() {
  if (switched_) Driver().ctx_set_current(caller_context_);
}

}  // namespace mla_tail::internal

#include "mla/internal/driver.h"

#include <cuda_runtime_api.h>

namespace mla_tail::internal {
namespace {

// The function as the CUDA 12.0 API defines it (cudaGetDriverEntryPointByVersion picks the
// version of that ABI, so the pointer types above stay right under later drivers).
template <typename F>
void Resolve(const char* name, F* function) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    *function = reinterpret_cast<F>(entry);
  } else {
    *function = nullptr;
  }
}

}  // namespace

const DriverApi& Driver() {
  static const DriverApi api = [] {
    DriverApi a{};
    Resolve("cuMemGetAddressRange", &a.mem_get_address_range);
    Resolve("cuPointerGetAttributes", &a.pointer_get_attributes);
    Resolve("cuCtxGetCurrent", &a.ctx_get_current);
    Resolve("cuCtxSetCurrent", &a.ctx_set_current);
    Resolve("cuCtxGetDevice", &a.ctx_get_device);
    Resolve("cuCtxGetId", &a.ctx_get_id);
    Resolve("cuDeviceGet", &a.device_get);
    Resolve("cuDevicePrimaryCtxRetain", &a.device_primary_ctx_retain);
    return a;
  }();
  return api;
}

}  // namespace mla_tail::internal

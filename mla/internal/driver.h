#ifndef MLA_TAIL_MLA_INTERNAL_DRIVER_H_
#define MLA_TAIL_MLA_INTERNAL_DRIVER_H_

// The CUDA driver functions the library calls directly, resolved once through
// cudaGetDriverEntryPointByVersion (the library links no libcuda). Driver calls leave the
// runtime's per-thread error state alone, so they never disturb an error the caller has pending.
// Not part of the public API.

#include <cuda.h>

namespace mla_tail::internal {

struct DriverApi {
  CUresult (*mem_get_address_range)(CUdeviceptr* base, size_t* size, CUdeviceptr pointer);
  CUresult (*pointer_get_attributes)(unsigned int count, CUpointer_attribute* attributes,
                                     void** data, CUdeviceptr pointer);
  CUresult (*ctx_get_current)(CUcontext* context);
  CUresult (*ctx_set_current)(CUcontext context);
  CUresult (*ctx_get_device)(CUdevice* device);
  CUresult (*ctx_get_id)(CUcontext context, unsigned long long* id);  // NOLINT(runtime/int)
  CUresult (*device_get)(CUdevice* device, int ordinal);
  CUresult (*device_primary_ctx_retain)(CUcontext* context, CUdevice device);

  // Whether every function was found.
  bool complete() const {
    return mem_get_address_range != nullptr && pointer_get_attributes != nullptr &&
           ctx_get_current != nullptr && ctx_set_current != nullptr && ctx_get_device != nullptr &&
           ctx_get_id != nullptr && device_get != nullptr && device_primary_ctx_retain != nullptr;
  }
};

// Resolved on the first call (thread-safe); a function the driver lacks is null.
const DriverApi& Driver();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_DRIVER_H_

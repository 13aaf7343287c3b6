#ifndef MLA_TAIL_TESTING_SUPPORT_DEVICE_FILLER_H_
#define MLA_TAIL_TESTING_SUPPORT_DEVICE_FILLER_H_

// Takes every byte of device memory cudaMalloc will give (down to 256-byte blocks) until
// Release or destruction: a runtime that filled the device with its KV cache.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace mla_tail_testing {

class DeviceFiller {
 public:
  DeviceFiller() = default;
  DeviceFiller(const DeviceFiller&) = delete;
  DeviceFiller& operator=(const DeviceFiller&) = delete;
  ~DeviceFiller() { Release(); }

  // The bytes taken; `leave_bytes` stay free (a sanitizer needs some for its own tracking).
  size_t Fill(size_t leave_bytes = 0) {
    void* reserve = nullptr;
    if (leave_bytes > 0 && cudaMalloc(&reserve, leave_bytes) != cudaSuccess) reserve = nullptr;
    size_t taken = 0;
    for (size_t chunk = size_t{1} << 30; chunk >= 256; chunk /= 2) {
      void* p = nullptr;
      while (cudaMalloc(&p, chunk) == cudaSuccess) {
        blocks_.push_back(p);
        taken += chunk;
      }
      cudaGetLastError();  // the failed allocation's error is not sticky; clear it
    }
    if (reserve != nullptr) cudaFree(reserve);
    return taken;
  }
  void Release() {
    for (void* p : blocks_) cudaFree(p);
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_DEVICE_FILLER_H_

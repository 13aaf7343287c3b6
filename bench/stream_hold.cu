#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "bench/stream_hold.h"

namespace mla_tail_bench {
namespace {

constexpr uint64_t kLimitNs = 20'000'000;  // 20 ms: far above any enqueue the benchmarks time

__global__ void HoldKernel(volatile int* flags) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (flags[0] == 0) {
    __nanosleep(256);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > kLimitNs) {
      flags[1] = 1;
      break;
    }
  }
}

}  // namespace

StreamHold::~StreamHold() {
  if (flags_ == nullptr) return;
  Release();  // a spin still waiting ends before its flag's memory goes
  cudaFreeHost(const_cast<int*>(flags_));
}

cudaError_t StreamHold::Hold(cudaStream_t stream) {
  if (flags_ == nullptr) {
    void* host = nullptr;
    if (const cudaError_t e = cudaHostAlloc(&host, 2 * sizeof(int), cudaHostAllocMapped);
        e != cudaSuccess) {
      return e;
    }
    void* device = nullptr;
    if (const cudaError_t e = cudaHostGetDevicePointer(&device, host, 0); e != cudaSuccess) {
      cudaFreeHost(host);
      return e;
    }
    flags_ = static_cast<volatile int*>(host);
    device_flags_ = static_cast<int*>(device);
  }
  flags_[0] = 0;
  flags_[1] = 0;
  void* arguments[] = {&device_flags_};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&HoldKernel), dim3(1), dim3(1), arguments,
                          0, stream);
}

void StreamHold::Release() {
  if (flags_ == nullptr) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  flags_[0] = 1;
}

bool StreamHold::TimedOut() const { return flags_ != nullptr && flags_[1] != 0; }

}  // namespace mla_tail_bench

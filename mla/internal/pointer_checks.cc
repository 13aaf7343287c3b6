#include "mla/internal/pointer_checks.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mla/internal/checked_ranges.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/driver.h"

namespace mla_tail::internal {
namespace {

constexpr int kCachedDevices = 64;  // devices past this are asked about on every call

struct DeviceCache {
  std::mutex mutex;
  CheckedRanges ranges;
  // ranges.stamp(), published after each change under the lock: read without it, per update.
  std::atomic<uint64_t> stamp{CheckedRanges().stamp()};
  // ranges.size() > 0, published likewise: other devices' checks skip an empty cache unlocked.
  std::atomic<bool> holds_ranges{false};

  void Publish() {
    stamp.store(ranges.stamp(), std::memory_order_release);
    holds_ranges.store(ranges.size() > 0, std::memory_order_release);
  }
};

DeviceCache& CacheOf(int device) {
  static auto* caches = new DeviceCache[kCachedDevices];
  return caches[device];
}

void* AsPointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

// The bytes of `e` from `at` on, when `at` is not where the buffer starts.
std::string From(const Extent& e, uintptr_t at) {
  return at == e.begin ? std::string() : absl::StrFormat(" (its bytes from %p)", AsPointer(at));
}

absl::Status EndsEarly(const Extent& e, uintptr_t allocation_end) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s = %p: the call touches its bytes up to %p (rows x stride), but its allocation ends at "
      "%p, %d bytes before",
      e.name, AsPointer(e.begin), AsPointer(e.end), AsPointer(allocation_end),
      static_cast<uint64_t>(e.end - allocation_end)));
}

// Asks CUDA about every mapping `e` spans and appends each to `found`, and to `device_owned`
// whether it is device memory (which no other device may use); OK when `device` can reach all of
// them at their addresses.
absl::Status Query(int device, const Extent& e, absl::InlinedVector<CheckedRanges::Range, 8>* found,
                   absl::InlinedVector<bool, 8>* device_owned) {
  const DriverApi& driver = Driver();
  if (!driver.complete()) {
    return absl::InternalError("the CUDA driver lacks a function this library calls directly");
  }
  uintptr_t at = e.begin;
  uintptr_t reservation = 0;
  while (at < e.end) {
    cudaPointerAttributes a = {};
    const cudaError_t error = cudaPointerGetAttributes(&a, AsPointer(at));
    if (error == cudaErrorInvalidValue) {
      a.type = cudaMemoryTypeUnregistered;  // drivers before unified reporting
    } else if (error != cudaSuccess) {
      return CudaStatus(error, absl::StrCat("cudaPointerGetAttributes(", e.name, ")"));
    }
    // The mapped range that holds `at`, and the address range reserved for it.
    CUdeviceptr base = 0, range_start = 0;
    size_t size = 0, range_size = 0;
    bool mapped = false;
    if (a.type != cudaMemoryTypeUnregistered) {
      CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                          CU_POINTER_ATTRIBUTE_RANGE_SIZE};
      void* data[] = {&range_start, &range_size};
      CUresult r = driver.pointer_get_attributes(2, attributes, data, at);
      if (r != CUDA_SUCCESS) {
        if (IsStickyCudaError(static_cast<cudaError_t>(r))) {
          return DriverStatus(r, "cuPointerGetAttributes");
        }
        range_start = 0;
        range_size = 0;
      }
      r = driver.mem_get_address_range(&base, &size, at);
      if (r == CUDA_SUCCESS) {
        mapped = base <= at && at - base < size;
      } else if (r != CUDA_ERROR_NOT_FOUND && r != CUDA_ERROR_INVALID_VALUE) {
        return DriverStatus(r, absl::StrCat("cuMemGetAddressRange(", e.name, ")"));
      }
      // Host allocations: the allocation's own range where the mapped one is not reported.
      if (!mapped && range_start != 0 && range_start <= at && at - range_start < range_size) {
        base = range_start;
        size = range_size;
        mapped = true;
      }
    }
    const bool first = at == e.begin;
    // Past the first mapping only more of the same reservation counts: a call must not run
    // from one allocation into an adjacent one.
    if (!first && (!mapped || range_start == 0 || range_start != reservation)) {
      return EndsEarly(e, at);
    }
    switch (a.type) {
      case cudaMemoryTypeUnregistered:
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s = %p is not memory CUDA knows (pageable host memory, or memory freed): device "
            "%d cannot reach it",
            e.name, AsPointer(e.begin), device));
      case cudaMemoryTypeDevice:
        if (a.device != device) {
          return absl::InvalidArgumentError(
              absl::StrFormat("%s = %p%s is memory of device %d; this tail runs on device %d",
                              e.name, AsPointer(e.begin), From(e, at), a.device, device));
        }
        break;
      case cudaMemoryTypeHost:
        if (a.devicePointer != AsPointer(at)) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s = %p%s is pinned host memory that device %d cannot reach at that address (pin "
              "it mapped: cudaHostAllocMapped or cudaHostRegisterMapped)",
              e.name, AsPointer(e.begin), From(e, at), device));
        }
        break;
      case cudaMemoryTypeManaged:
        if (a.devicePointer == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrFormat("%s = %p%s is managed memory that device %d cannot reach", e.name,
                              AsPointer(e.begin), From(e, at), device));
        }
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrFormat("%s = %p%s is memory of a kind this library does not know (type %d)",
                            e.name, AsPointer(e.begin), From(e, at), static_cast<int>(a.type)));
    }
    if (!mapped) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s = %p%s: CUDA reports no allocation that holds it", e.name,
                          AsPointer(e.begin), From(e, at)));
    }
    if (first) reservation = range_start != 0 ? range_start : base;
    found->push_back({base, base + size, reservation});
    device_owned->push_back(a.type == cudaMemoryTypeDevice);
    at = base + size;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckExtents(int device, absl::Span<const Extent> extents, PointerCheck mode) {
  for (const Extent& e : extents) {
    if (e.end < e.begin) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s = %p: the bytes it spans run past the end of the address space",
                          e.name, AsPointer(e.begin)));
    }
  }
  const bool cached = device >= 0 && device < kCachedDevices;
  absl::InlinedVector<const Extent*, 8> unchecked;
  if (cached && mode == PointerCheck::kCached) {
    DeviceCache& cache = CacheOf(device);
    std::lock_guard<std::mutex> lock(cache.mutex);
    for (const Extent& e : extents) {
      if (!cache.ranges.Covers(e.begin, e.end)) unchecked.push_back(&e);
    }
  } else {
    for (const Extent& e : extents) unchecked.push_back(&e);
  }
  if (unchecked.empty()) return absl::OkStatus();

  // The queries neither fail for nor break a capture under way on this or another thread.
  RelaxedCaptureMode relaxed;
  absl::InlinedVector<CheckedRanges::Range, 8> found;
  absl::InlinedVector<bool, 8> device_owned;
  for (const Extent* e : unchecked) MLA_RETURN_IF_ERROR(Query(device, *e, &found, &device_owned));
  if (cached) {
    {
      DeviceCache& cache = CacheOf(device);
      std::lock_guard<std::mutex> lock(cache.mutex);
      for (const CheckedRanges::Range& r : found) cache.ranges.Add(r);
      cache.Publish();
    }
    // Addresses are the process's, not a device's: memory found where another device's cache
    // holds an overlapping range means that range's memory was freed, so it must not pass there
    // any longer. The same range is kept where the memory is managed or mapped host memory, which
    // every device may reach (device memory is one device's alone).
    for (int other = 0; other < kCachedDevices; ++other) {
      if (other == device) continue;
      DeviceCache& cache = CacheOf(other);
      if (!cache.holds_ranges.load(std::memory_order_acquire)) continue;
      std::lock_guard<std::mutex> lock(cache.mutex);
      for (size_t i = 0; i < found.size(); ++i) {
        cache.ranges.Drop(found[i], /*keep_same=*/!device_owned[i]);
      }
      cache.Publish();
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTailBuffers(int device, const TailShape& shape, const TailBuffers& buffers,
                              PointerCheck mode) {
  const TailExtents e = ExtentsOf(shape, buffers);
  absl::InlinedVector<Extent, 8> present;
  for (const Extent& x : e.All()) {
    if (x.end != x.begin) present.push_back(x);
  }
  return CheckExtents(device, present, mode);
}

uint64_t CheckedPointersStamp(int device) {
  if (device < 0 || device >= kCachedDevices) return 0;
  return CacheOf(device).stamp.load(std::memory_order_acquire);
}

void ForgetCheckedPointers() {
  for (int device = 0; device < kCachedDevices; ++device) {
    DeviceCache& cache = CacheOf(device);
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.ranges.Clear();
    cache.Publish();
  }
}

}  // namespace mla_tail::internal

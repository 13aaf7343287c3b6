#ifndef MLA_TAIL_MLA_INTERNAL_POINTER_CHECKS_H_
#define MLA_TAIL_MLA_INTERNAL_POINTER_CHECKS_H_

// What the caller's pointers point at, asked of CUDA before anything is launched or stored: a
// kernel that dereferences host memory the device cannot reach, memory of another device, or
// bytes past the end of an allocation faults, and the fault ends the process's CUDA context.
//
// A byte range passes when it lies in one allocation that `device` can reach at that address:
// device memory of `device`; managed memory; pinned host memory mapped into the device's address
// space (its device address equal to its host address, as under unified addressing); or several
// mappings laid end to end in one reserved address range (cuMemCreate / cuMemMap, as PyTorch's
// expandable segments make). Two separate allocations that happen to be adjacent do not: a call
// must not run from one into the next.
//
// Checks made are cached per device, by the allocation's address range, for the process (the
// allocations a decode step uses are asked about once). A cached check cannot see an allocation
// freed since: memory freed and reallocated at the same addresses passes as the memory it
// replaced did, and a freed range that is no longer mapped passes too (and then faults).
// PointerCheck::kEveryCall asks CUDA on every call instead.
//
// The queries (cudaPointerGetAttributes; the driver's cuMemGetAddressRange and
// cuPointerGetAttributes) synchronise nothing and run in relaxed capture mode, so they are legal
// while this or another thread captures; a failed driver query leaves the runtime's error state
// alone. Not part of the public API.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "mla/internal/tail_extents.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

enum class PointerCheck {
  kCached,     // ask CUDA about an allocation the first time a call touches it
  kEveryCall,  // ask CUDA about every buffer on every call
};

// OK when every extent lies in memory that `device` (the current device, DeviceGuard) can reach
// at that address; otherwise InvalidArgument naming the buffer, its address and what is wrong.
absl::Status CheckExtents(int device, absl::Span<const Extent> extents, PointerCheck mode);

// CheckExtents for every buffer a tail of `shape` over `buffers` (both validated) touches.
absl::Status CheckTailBuffers(int device, const TailShape& shape, const TailBuffers& buffers,
                              PointerCheck mode);

// A stamp of `device`'s cache that changes whenever the cache forgets a range (a range of memory
// freed since, found overlapped by a new one; the cache full; ForgetCheckedPointers): a cached
// check that passed while the stamp was s passes again while it is s. 0, never a cache's stamp,
// for a device whose checks are not cached. Read it before the check it stands for.
uint64_t CheckedPointersStamp(int device);

// Forgets every cached check (tests and benchmarks measure the first call with it).
void ForgetCheckedPointers();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_POINTER_CHECKS_H_

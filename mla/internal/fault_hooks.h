#ifndef MLA_TAIL_MLA_INTERNAL_FAULT_HOOKS_H_
#define MLA_TAIL_MLA_INTERNAL_FAULT_HOOKS_H_

// Fault injection for tests: hooks the library calls at the points where faults arise in the
// field, so that a test can make those faults happen on demand and check that each returns a
// status, publishes nothing half-built, and is followed by a successful retry. Process-wide and
// empty in production (an empty hook costs one test of a std::function). Not part of the public
// API; tests set them through ScopedFaultHooks.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace mla_tail::internal {

struct FaultHooks {
  // Asked each time the BMM path plans a GEMM; true makes the plan behave as if cuBLASLt's
  // heuristic had returned no algorithm (NotFound, nothing planned, nothing launched).
  std::function<bool()> bmm_finds_no_algorithm;

  // Asked each time the BMM path needs cuBLASLt; true makes it behave as if libcublasLt could
  // not be loaded (FailedPrecondition, nothing allocated, nothing launched).
  std::function<bool()> cublaslt_missing;

  // Called by graph/ on its own capturing stream as the capture begins, before the tail's
  // launches (capture_began), and after them, before the capture ends (during_capture): a test
  // may break the capture at either point, as a prohibited synchronisation would.
  std::function<void(cudaStream_t capturing)> capture_began;
  std::function<void(cudaStream_t capturing)> during_capture;
  // Called on a capturing stream after the launch whose node the library reads back (the tail's
  // node that holds the caller's pointers), before it reads it: a test may capture other work
  // there, as another thread launching into the same stream could.
  std::function<void(cudaStream_t capturing)> before_node_read_back;
  // Set, LoadKernel calls it with each kernel and the dynamic shared memory it would allow it, and
  // asks CUDA nothing: a test without a GPU lists what LoadTailKernels loads.
  std::function<void(const void* kernel, size_t smem_bytes)> kernel_loaded;
};

// The process's hooks (empty unless a test installed some).
const FaultHooks& ActiveFaultHooks();

// Installs `hooks` for the scope's lifetime (tests only; not thread-safe against library calls
// running meanwhile on other threads).
class ScopedFaultHooks {
 public:
  explicit ScopedFaultHooks(FaultHooks hooks);
  ~ScopedFaultHooks();
  ScopedFaultHooks(const ScopedFaultHooks&) = delete;
  ScopedFaultHooks& operator=(const ScopedFaultHooks&) = delete;

 private:
  FaultHooks previous_;
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_FAULT_HOOKS_H_

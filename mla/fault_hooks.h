#ifndef MLA_FAULT_HOOKS_H_
#define MLA_FAULT_HOOKS_H_

// Fault injection: hooks the library calls at the points where faults arise in the field, so
// that tests can make those faults happen on demand and check that each one returns a status,
// publishes nothing half-built, and is followed by a successful retry once its cause is gone.
// Production code leaves them empty (the default); an empty hook costs one test of a
// std::function.

#include <cuda_runtime_api.h>

#include <functional>

namespace mla {

struct FaultHooks {
  // Asked each time the BMM path plans a GEMM; true makes the plan behave as if cuBLASLt's
  // heuristic had returned no algorithm (NotFound, nothing planned, nothing launched).
  std::function<bool()> bmm_finds_no_algorithm;

  // Called by graph/ on the capturing stream after the tail's launches, before the capture
  // ends: a test may break the capture here, as a prohibited synchronisation would.
  std::function<void(cudaStream_t capturing)> during_capture;
};

}  // namespace mla

#endif  // MLA_FAULT_HOOKS_H_

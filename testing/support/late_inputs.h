#ifndef MLA_TAIL_TESTING_SUPPORT_LATE_INPUTS_H_
#define MLA_TAIL_TESTING_SUPPORT_LATE_INPUTS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "testing/support/problem.h"

namespace mla_tail_testing {

// A problem whose latent, gate (if it has one) and lengths an upstream kernel writes late: before
// it, they hold NaN and zero lengths, so a tail that read them before its dependency wait shows
// it.
struct LateInputs {
  DeviceMemory saved;
  size_t latent_bytes = 0, gate_bytes = 0, lengths_bytes = 0;

  // Copies the problem's inputs aside, on `stream`, and waits for the copies.
  static absl::StatusOr<LateInputs> Save(const Problem& problem, cudaStream_t stream);

  // Overwrites the inputs with NaN and zero lengths (in stream order).
  absl::Status Spoil(const Problem& problem, cudaStream_t stream) const;

  // The upstream kernel (LaunchLateWriter): triggers its dependents at once, writes the saved
  // inputs back 50 us later.
  cudaError_t LaunchWriter(const Problem& problem, cudaStream_t stream) const;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_LATE_INPUTS_H_

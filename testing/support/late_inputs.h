#ifndef MLA_TAIL_TESTING_SUPPORT_LATE_INPUTS_H_
#define MLA_TAIL_TESTING_SUPPORT_LATE_INPUTS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/problem.h"

namespace mla_tail_testing {

// A problem whose latent, gate (if it has one) and lengths an upstream kernel writes late: before
// it, they hold NaN and zero lengths, so a tail that read them before its dependency wait shows
// it. Saved with a live row count (SaveWithCount), the upstream kernel writes the count late as
// well, and until then it holds a wrong value.
struct LateInputs {
  DeviceMemory saved;  // latent, gate, lengths, and the count when there is one
  size_t latent_bytes = 0, gate_bytes = 0, lengths_bytes = 0;
  // With a count: the lengths and the count the tail reads, the count right after the lengths, so
  // that one copy of the upstream kernel writes both. Empty without a count.
  DeviceMemory lengths_and_count;
  bool has_count = false;
  int32_t count = 0;

  // Copies the problem's inputs aside, on `stream`, and waits for the copies.
  static absl::StatusOr<LateInputs> Save(const Problem& problem, cudaStream_t stream);

  // The same, with a live row count of `count` rows. The tail reads the count and the lengths (a
  // copy of the problem's) from memory of the LateInputs' own: it takes buffers() below.
  static absl::StatusOr<LateInputs> SaveWithCount(const Problem& problem, int32_t count,
                                                  cudaStream_t stream);

  // The buffers of a tail behind the upstream kernel: the problem's, and with a count `lengths`
  // and `row_count` pointing at the LateInputs' own (row_count_before_upstream unset: the count
  // is written by the upstream kernel).
  mla_tail::TailBuffers buffers(const Problem& problem) const;

  // Overwrites the inputs with NaN and zero lengths, and a count with `spoiled_count`, in stream
  // order (waiting for the count's copy, whose source is on the host).
  absl::Status Spoil(const Problem& problem, cudaStream_t stream, int32_t spoiled_count = 0) const;

  // The upstream kernel (LaunchLateWriter): triggers its dependents at once, writes the saved
  // inputs (and count) back 50 us later.
  cudaError_t LaunchWriter(const Problem& problem, cudaStream_t stream) const;

 private:
  static absl::StatusOr<LateInputs> SaveInputs(const Problem& problem, bool has_count,
                                               int32_t count, cudaStream_t stream);
  int32_t* lengths_target(const Problem& problem) const;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_LATE_INPUTS_H_

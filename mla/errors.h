#ifndef MLA_TAIL_MLA_ERRORS_H_
#define MLA_TAIL_MLA_ERRORS_H_

// How the library reports failures. Every public call returns absl::Status / absl::StatusOr;
// nothing throws or aborts. A call that fails its checks (the arguments, what the buffers point
// at, the stream, the objects' state) has launched and written nothing of the caller's; what can
// still fail once a call has launched (CUDA or cuBLASLt refusing a later launch of the same call)
// is in docs/spec.md, "Errors". The codes, in short (docs/spec.md, "Errors",
// says when each is returned; docs/contract_test keeps the two lists the same):
//
//   code                  meaning                                        what a runtime does
//   InvalidArgument       an argument is wrong (the message names it): a     fix the call
//                         shape, stride, a buffer the device cannot reach,
//                         a handle of another graph
//   OutOfRange            rows beyond what an object was built for         use a larger bucket
//   FailedPrecondition    no usable sm_90 device, an object not ready,     set it up first; end
//                         cuBLASLt not loadable (the BMM path), or the     and recapture
//                         caller's own capture already invalid
//   ResourceExhausted     device memory ran out                            free memory, retry
//   NotFound              cuBLASLt has no algorithm for the BMM path       use the fused path
//   Unimplemented         the BMM path with e4m3 W_UV or output            use the fused path
//   Aborted               CUDA refused a capture the library made itself   retry
//   DataLoss              a sticky CUDA error: the device context is lost  restart the process
//   Internal              any other CUDA or cuBLASLt failure               report it
//
// Statuses that come from CUDA carry the cudaError_t (CudaErrorOf). Sticky errors (an illegal
// address, a kernel fault, an ECC error) corrupt the CUDA context for the whole process: every
// later CUDA call fails too. IsStickyCudaError tells them apart from transient ones.
//
// The library never clears a CUDA error it did not cause: an error pending from the caller's
// own launches stays pending (cudaGetLastError) across every call of this library that
// succeeds (a call that fails in CUDA leaves its own error, as CUDA keeps one: docs/spec.md).

#include <cuda_runtime_api.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mla_tail {

// The payload type URL under which a status carries its cudaError_t (as a decimal number).
inline constexpr absl::string_view kCudaErrorPayloadUrl = "mla_tail/cuda_error";

// The CUDA error behind `status`, when it came from a CUDA call.
std::optional<cudaError_t> CudaErrorOf(const absl::Status& status);

// Whether `status` reports a sticky CUDA error (code DataLoss): the process's CUDA context is
// unusable and must be torn down.
bool IsStickyCudaError(const absl::Status& status);

// Whether a CUDA error is sticky (corrupts the context): every error CUDA 13's driver_types.h
// documents as leaving the process unusable, an uncorrectable ECC error, a destroyed context.
bool IsStickyCudaError(cudaError_t error);

}  // namespace mla_tail

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define MLA_TAIL_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    const ::absl::Status _mla_tail_status = (expr);      \
    if (!_mla_tail_status.ok()) return _mla_tail_status; \
  } while (false)

#endif  // MLA_TAIL_MLA_ERRORS_H_

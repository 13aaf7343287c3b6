#include "mla_tail/mla/errors.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "mla_tail/mla/version.h"

namespace mla_tail {

const char* Version() {
  static const std::string version = absl::StrCat(
      MLA_TAIL_VERSION_MAJOR, ".", MLA_TAIL_VERSION_MINOR, ".", MLA_TAIL_VERSION_PATCH);
  return version.c_str();
}

// The errors CUDA 13's driver_types.h documents as leaving the process's CUDA state unusable
// ("the process must be terminated and relaunched"), an uncorrectable ECC error, and a destroyed
// context.
bool IsStickyCudaError(cudaError_t error) {
  switch (error) {
    case cudaErrorContained:
    case cudaErrorMpsClientTerminated:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorExternalDevice:
    case cudaErrorTensorMemoryLeak:
      return true;
    default:
      return false;
  }
}

bool IsStickyCudaError(const absl::Status& status) {
  const std::optional<cudaError_t> error = CudaErrorOf(status);
  return status.code() == absl::StatusCode::kDataLoss && error.has_value() &&
         IsStickyCudaError(*error);
}

std::optional<cudaError_t> CudaErrorOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kCudaErrorPayloadUrl);
  int value = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &value)) {
    return std::nullopt;
  }
  return static_cast<cudaError_t>(value);
}

}  // namespace mla_tail

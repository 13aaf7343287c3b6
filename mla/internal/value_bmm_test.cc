#include "mla/internal/value_bmm.h"

#include <cublasLt.h>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mla_tail::internal {
namespace {

using ::testing::HasSubstr;

// cuBLASLt's statuses as the error table of docs/spec.md sorts them; the message names the call.
TEST(CublasStatusTest, MapsEachStatusToItsCode) {
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "cublasLtMatmul").ok());
  const struct {
    cublasStatus_t status;
    absl::StatusCode code;
  } cases[] = {
      {CUBLAS_STATUS_ALLOC_FAILED, absl::StatusCode::kResourceExhausted},
      {CUBLAS_STATUS_NOT_SUPPORTED, absl::StatusCode::kFailedPrecondition},
      {CUBLAS_STATUS_ARCH_MISMATCH, absl::StatusCode::kFailedPrecondition},
      // The descriptors are the library's own, built from validated arguments.
      {CUBLAS_STATUS_INVALID_VALUE, absl::StatusCode::kInternal},
      {CUBLAS_STATUS_EXECUTION_FAILED, absl::StatusCode::kInternal},
      {CUBLAS_STATUS_INTERNAL_ERROR, absl::StatusCode::kInternal},
      {CUBLAS_STATUS_NOT_INITIALIZED, absl::StatusCode::kInternal},
  };
  for (const auto& c : cases) {
    const absl::Status status = CublasStatus(c.status, "cublasLtMatmul");
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(status.message(), HasSubstr("cublasLtMatmul: "));
  }
}

}  // namespace
}  // namespace mla_tail::internal

// CUDA errors as statuses (CPU only: no CUDA call needs a device here).

#include "mla_tail/mla/errors.h"

#include <string>

#include "gtest/gtest.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/mla/version.h"

namespace mla_tail {
namespace {

TEST(CudaStatusTest, SuccessIsOk) { EXPECT_TRUE(internal::CudaStatus(cudaSuccess, "x").ok()); }

TEST(CudaStatusTest, StickyErrorsAreDataLossAndCarryTheirError) {
  for (cudaError_t error :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorIllegalInstruction,
        cudaErrorMisalignedAddress, cudaErrorHardwareStackError, cudaErrorECCUncorrectable}) {
    const absl::Status status = internal::CudaStatus(error, "ColumnSplit launch");
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_TRUE(IsStickyCudaError(status)) << status;
    ASSERT_TRUE(CudaErrorOf(status).has_value());
    EXPECT_EQ(*CudaErrorOf(status), error);
    EXPECT_NE(status.message().find("ColumnSplit launch"), absl::string_view::npos);
    EXPECT_NE(status.message().find("sticky"), absl::string_view::npos);
  }
}

TEST(CudaStatusTest, TransientErrorsAreNotSticky) {
  const struct {
    cudaError_t error;
    absl::StatusCode code;
  } cases[] = {
      {cudaErrorMemoryAllocation, absl::StatusCode::kResourceExhausted},
      // The library validates every argument first: an invalid value is its own fault.
      {cudaErrorInvalidValue, absl::StatusCode::kInternal},
      {cudaErrorInvalidResourceHandle, absl::StatusCode::kInvalidArgument},
      {cudaErrorNoDevice, absl::StatusCode::kFailedPrecondition},
      {cudaErrorStreamCaptureInvalidated, absl::StatusCode::kAborted},
      {cudaErrorStreamCaptureUnsupported, absl::StatusCode::kAborted},
      {cudaErrorNotReady, absl::StatusCode::kInternal},
  };
  for (const auto& c : cases) {
    const absl::Status status = internal::CudaStatus(c.error, "call");
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_FALSE(IsStickyCudaError(status)) << status;
    ASSERT_TRUE(CudaErrorOf(status).has_value());
    EXPECT_EQ(*CudaErrorOf(status), c.error);
  }
}

TEST(CudaStatusTest, StatusesNotFromCudaCarryNoError) {
  EXPECT_FALSE(CudaErrorOf(absl::InvalidArgumentError("heads = 0")).has_value());
  EXPECT_FALSE(IsStickyCudaError(absl::DataLossError("not from CUDA")));
  EXPECT_FALSE(IsStickyCudaError(absl::OkStatus()));
}

TEST(VersionTest, MatchesTheHeader) {
  EXPECT_STREQ(Version(), (std::to_string(MLA_TAIL_VERSION_MAJOR) + "." +
                           std::to_string(MLA_TAIL_VERSION_MINOR) + "." +
                           std::to_string(MLA_TAIL_VERSION_PATCH))
                              .c_str());
}

absl::Status ReturnsEarly(bool fail, int* reached) {
  MLA_TAIL_RETURN_IF_ERROR(fail ? absl::InternalError("x") : absl::OkStatus());
  *reached = 1;
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, ReturnsTheError) {
  int reached = 0;
  EXPECT_EQ(ReturnsEarly(true, &reached).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(ReturnsEarly(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

}  // namespace
}  // namespace mla_tail

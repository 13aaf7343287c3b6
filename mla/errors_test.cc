// CUDA errors as statuses (CPU only: no CUDA call here needs a device).

#include "mla_tail/mla/errors.h"

#include <string>

#include "gtest/gtest.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/mla/version.h"

namespace mla_tail {
namespace {

TEST(CudaStatusTest, SuccessIsOk) { EXPECT_TRUE(internal::CudaStatus(cudaSuccess, "x").ok()); }

// Every error CUDA 13's driver_types.h documents as leaving the process's CUDA state unusable
// ("the process must be terminated and relaunched"), an uncorrectable ECC error, and a
// destroyed context.
TEST(CudaStatusTest, StickyErrorsAreDataLossAndCarryTheirError) {
  for (cudaError_t error :
       {cudaErrorContained, cudaErrorIllegalAddress, cudaErrorLaunchTimeout, cudaErrorAssert,
        cudaErrorHardwareStackError, cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
        cudaErrorInvalidAddressSpace, cudaErrorInvalidPc, cudaErrorLaunchFailure,
        cudaErrorTensorMemoryLeak, cudaErrorMpsClientTerminated, cudaErrorExternalDevice,
        cudaErrorECCUncorrectable, cudaErrorContextIsDestroyed}) {
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

TEST(CudaStatusTest, DriverResultsMapAsTheRuntimeErrorsOfTheirNumber) {
  EXPECT_EQ(internal::DriverStatus(CUDA_ERROR_CONTAINED, "x").code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(internal::DriverStatus(CUDA_ERROR_ILLEGAL_ADDRESS, "x").code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(internal::DriverStatus(CUDA_ERROR_OUT_OF_MEMORY, "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(internal::DriverStatus(CUDA_SUCCESS, "x").ok());
}

// Capture errors on the caller's stream: the caller's capture is invalid, and a retry of the
// same call cannot help. On the library's own capture they stay Aborted (retry).
TEST(CudaStatusTest, CaptureErrorsOnTheCallersStreamAreFailedPrecondition) {
  for (cudaError_t error : {cudaErrorStreamCaptureInvalidated, cudaErrorStreamCaptureUnsupported,
                            cudaErrorStreamCaptureIsolation, cudaErrorStreamCaptureWrongThread}) {
    const absl::Status own = internal::CudaStatus(error, "launch");
    EXPECT_EQ(own.code(), absl::StatusCode::kAborted) << own;
    const absl::Status callers = internal::OnCallersCapture(own);
    EXPECT_EQ(callers.code(), absl::StatusCode::kFailedPrecondition) << callers;
    ASSERT_TRUE(CudaErrorOf(callers).has_value());
    EXPECT_EQ(*CudaErrorOf(callers), error);
    EXPECT_NE(callers.message().find("capture anew"), absl::string_view::npos) << callers;
    // Mapped once: a status already mapped stays as it is.
    EXPECT_EQ(internal::OnCallersCapture(callers), callers);
  }
  // Anything else is left as it was.
  for (const absl::Status& other :
       {absl::OkStatus(), internal::CudaStatus(cudaErrorIllegalAddress, "x"),
        internal::CudaStatus(cudaErrorMemoryAllocation, "x"),
        absl::InvalidArgumentError("rows = 0")}) {
    EXPECT_EQ(internal::OnCallersCapture(other), other);
  }
}

// CUDA refusing a handle the caller gave (an exec of another graph) is the caller's
// InvalidArgument, still carrying the CUDA error; a sticky error stays DataLoss.
TEST(CudaStatusTest, CallersHandleErrorsAreInvalidArgumentWithTheirError) {
  for (cudaError_t error : {cudaErrorInvalidValue, cudaErrorInvalidResourceHandle}) {
    const absl::Status status = internal::CallersHandleStatus(error, "exec of another graph");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    ASSERT_TRUE(CudaErrorOf(status).has_value()) << status;
    EXPECT_EQ(*CudaErrorOf(status), error);
    EXPECT_FALSE(IsStickyCudaError(status));
    EXPECT_NE(status.message().find("exec of another graph"), absl::string_view::npos) << status;
    EXPECT_NE(status.message().find(cudaGetErrorName(error)), absl::string_view::npos) << status;
  }
  const absl::Status sticky = internal::CallersHandleStatus(cudaErrorIllegalAddress, "x");
  EXPECT_EQ(sticky.code(), absl::StatusCode::kDataLoss) << sticky;
  EXPECT_TRUE(IsStickyCudaError(sticky));
  EXPECT_TRUE(internal::CallersHandleStatus(cudaSuccess, "x").ok());
}

TEST(CudaStatusTest, StatusesNotFromCudaCarryNoError) {
  EXPECT_FALSE(CudaErrorOf(absl::InvalidArgumentError("heads = 0")).has_value());
  EXPECT_FALSE(IsStickyCudaError(absl::DataLossError("not from CUDA")));
  EXPECT_FALSE(IsStickyCudaError(absl::OkStatus()));
}

// Without a usable device (this machine's case when it has no GPU or no driver) the device check
// is FailedPrecondition carrying CUDA's error; with one, a device that does not exist is
// InvalidArgument and device 0 passes.
TEST(CheckDeviceTest, NoDeviceIsFailedPreconditionWithItsError) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  const absl::Status status = internal::CheckDevice(0);
  if (error != cudaSuccess) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    ASSERT_TRUE(CudaErrorOf(status).has_value()) << status;
    EXPECT_EQ(*CudaErrorOf(status), error);
  } else if (count > 0) {
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(internal::CheckDevice(count).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(internal::CheckDevice(-1).code(), absl::StatusCode::kInvalidArgument);
  }
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

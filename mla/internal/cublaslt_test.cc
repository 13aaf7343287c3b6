// cuBLASLt loaded at run time (CPU only: loading and resolving need no device). The build
// machine has the CUDA toolkit, so the library's own candidates load here.

#include "mla/internal/cublaslt.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/internal/fault_hooks.h"

namespace mla_tail::internal {
namespace {

using ::testing::HasSubstr;

const std::string kSoname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

TEST(CublasLtTest, CandidatesAreTheSonameThenTheToolkitsFile) {
  const std::vector<std::string> candidates = CublasLtCandidates();
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_EQ(candidates[0], kSoname);
  EXPECT_EQ(candidates[1].substr(0, 1), "/");
  EXPECT_THAT(candidates[1], ::testing::EndsWith("/lib64/" + kSoname));
}

TEST(CublasLtTest, LoadsEveryFunctionOnce) {
  absl::StatusOr<const CublasLtApi*> lt = CublasLt();
  ASSERT_TRUE(lt.ok()) << lt.status();
#define MLA_TAIL_EXPECT_RESOLVED(name) EXPECT_NE((*lt)->name, nullptr) << #name;
  MLA_TAIL_CUBLASLT_FUNCTIONS(MLA_TAIL_EXPECT_RESOLVED)
#undef MLA_TAIL_EXPECT_RESOLVED
  EXPECT_STREQ((*lt)->cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
               "CUBLAS_STATUS_NOT_SUPPORTED");
  absl::StatusOr<const CublasLtApi*> again = CublasLt();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *lt);
}

TEST(CublasLtTest, EachCandidateIsTriedInOrder) {
  const std::vector<std::string> toolkit = CublasLtCandidates();
  absl::StatusOr<CublasLtApi> api = LoadCublasLt({"/nonexistent/" + kSoname, toolkit[1]});
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_NE(api->cublasLtMatmul, nullptr);
}

TEST(CublasLtTest, MissingFilesAreFailedPreconditionNamingEach) {
  absl::StatusOr<CublasLtApi> api =
      LoadCublasLt({"/nonexistent/" + kSoname, "libmla_tail_no_such_library.so"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition) << api.status();
  EXPECT_THAT(api.status().message(), HasSubstr("BMM path needs cuBLASLt"));
  EXPECT_THAT(api.status().message(), HasSubstr("/nonexistent/" + kSoname));
  EXPECT_THAT(api.status().message(), HasSubstr("libmla_tail_no_such_library.so"));
}

TEST(CublasLtTest, ALibraryWithoutTheFunctionsIsRefused) {
  absl::StatusOr<CublasLtApi> api = LoadCublasLt({"libm.so.6"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kFailedPrecondition) << api.status();
  EXPECT_THAT(api.status().message(), HasSubstr("libm.so.6 lacks cublasLtCreate"));
}

TEST(CublasLtTest, TheFaultHookMakesItMissingForItsScope) {
  {
    FaultHooks faults;
    faults.cublaslt_missing = [] { return true; };
    ScopedFaultHooks hooks(faults);
    absl::StatusOr<const CublasLtApi*> lt = CublasLt();
    ASSERT_FALSE(lt.ok());
    EXPECT_EQ(lt.status().code(), absl::StatusCode::kFailedPrecondition) << lt.status();
  }
  EXPECT_TRUE(CublasLt().ok());
}

}  // namespace
}  // namespace mla_tail::internal

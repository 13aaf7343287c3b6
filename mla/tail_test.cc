// MlaTail::Create's option checks, which run before any CUDA call (CPU only: no GPU needed).
// Everything else of MlaTail runs on the GPU: testing/mla_gpu_test and the other GPU suites.

#include "mla_tail/mla/tail.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mla_tail {
namespace {

using ::testing::HasSubstr;

TEST(TailOptionsTest, OptionsOutsideTheirRangesAreRefusedByName) {
  struct Case {
    void (*mutate)(TailOptions&);
    const char* message;
  };
  const Case cases[] = {
      {[](TailOptions& o) { o.max_heads = 0; }, "TailOptions.max_heads = 0 is outside [1, 128]"},
      {[](TailOptions& o) { o.max_heads = 129; },
       "TailOptions.max_heads = 129 is outside [1, 128]"},
      {[](TailOptions& o) { o.max_rows = 0; }, "TailOptions.max_rows = 0 is outside [1, 65536]"},
      {[](TailOptions& o) { o.max_rows = 65537; },
       "TailOptions.max_rows = 65537 is outside [1, 65536]"},
      {[](TailOptions& o) { o.fused_kernel = static_cast<FusedKernel>(99); },
       "TailOptions.fused_kernel = 99 is not a FusedKernel"},
  };
  for (const Case& c : cases) {
    TailOptions options;
    c.mutate(options);
    const absl::Status status = MlaTail::Create(0, options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace mla_tail

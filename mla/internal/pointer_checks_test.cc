// The pointer checks' refusals that need no CUDA (CPU only).

#include "mla/internal/pointer_checks.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mla_tail::internal {
namespace {

using ::testing::HasSubstr;

// A span that wraps past the top of the address space is refused by name before any query: with
// its end below its begin, the query loop and the cache would otherwise see nothing to check.
TEST(CheckExtentsTest, RefusesASpanThatWraps) {
  const Extent wrapped{"lengths", ~uintptr_t{0xFF}, 0x100};
  for (PointerCheck mode : {PointerCheck::kCached, PointerCheck::kEveryCall}) {
    const absl::Status status = CheckExtents(0, {&wrapped, 1}, mode);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("lengths = "));
    EXPECT_THAT(std::string(status.message()), HasSubstr("past the end of the address space"));
  }
}

}  // namespace
}  // namespace mla_tail::internal

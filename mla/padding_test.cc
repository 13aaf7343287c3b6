// ZeroPaddingLengths' argument checks, which run before any CUDA call, and a full bucket, which
// needs nothing of CUDA (CPU only: no GPU needed). The writes themselves: testing/safety_gpu_test.

#include "mla_tail/mla/padding.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla_tail/mla/tail_args.h"  // kMaxQ, kMaxRows

namespace mla_tail {
namespace {

using ::testing::HasSubstr;

// Host words stand in for the lengths: a refused call must not have looked at them, let alone
// written them.
struct Words {
  alignas(16) int32_t at[16];
  Words() {
    for (int32_t& w : at) w = 0x5a5a5a5a;
  }
  bool untouched() const {
    for (int32_t w : at) {
      if (w != 0x5a5a5a5a) return false;
    }
    return true;
  }
};

TEST(ZeroPaddingLengthsTest, RefusesBadArgumentsByName) {
  Words words;
  int32_t* const l = words.at;
  struct Case {
    int32_t* lengths;
    int rows, bucket_rows, q;
    const char* message;
  };
  const Case cases[] = {
      {nullptr, 0, 16, 1, "lengths is null"},
      {reinterpret_cast<int32_t*>(reinterpret_cast<char*>(l) + 2), 0, 16, 1, "4-byte aligned"},
      {l, 0, 15, 2, "bucket_rows = 15, q = 2"},  // only the bucket is not a multiple of q
      {l, 3, 16, 2, "rows = 3"},                 // only the rows are not
      {l, 20, 16, 1, "rows = 20, bucket_rows = 16"},
      {l, -1, 16, 1, "rows = -1"},
      {l, 0, 16, 0, "q = 0"},
      {l, 0, 16, kMaxQ + 1, "q = 65"},
      {l, 0, kMaxRows + 1, 1, "bucket_rows = 65537"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ZeroPaddingLengths(c.lengths, c.rows, c.bucket_rows, c.q, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
  EXPECT_TRUE(words.untouched());
}

// rows = bucket_rows: nothing to write, so nothing is checked, neither the memory (host words
// here) nor the stream (a handle that is none).
TEST(ZeroPaddingLengthsTest, AFullBucketTouchesNothing) {
  Words words;
  const auto not_a_stream = reinterpret_cast<cudaStream_t>(uintptr_t{0x1234});
  for (int q : {1, 2, 4}) {
    const absl::Status status = ZeroPaddingLengths(words.at, 16, 16, q, not_a_stream);
    EXPECT_TRUE(status.ok()) << "q = " << q << ": " << status;
  }
  EXPECT_TRUE(ZeroPaddingLengths(words.at, 0, 0, 1, not_a_stream).ok());
  EXPECT_TRUE(words.untouched());
}

}  // namespace
}  // namespace mla_tail

#ifndef MLA_TAIL_TESTING_SUPPORT_GPU_STREAM_TEST_H_
#define MLA_TAIL_TESTING_SUPPORT_GPU_STREAM_TEST_H_

// The fixture the GPU suites share: the GPU gate of gpu.h, then a non-blocking stream of the
// test's own, destroyed after it. A derived SetUp calls this one first and returns when it
// skipped or failed (StreamReady() is false).

#include <cuda_runtime_api.h>

#include "gtest/gtest.h"
#include "testing/support/gpu.h"

namespace mla_tail_testing {

template <typename Base = ::testing::Test>
class GpuStreamTest : public Base {
 protected:
  void SetUp() override {
    MLA_REQUIRE_GPU_OR_SKIP();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  bool StreamReady() const { return stream_ != nullptr; }

  cudaStream_t stream_ = nullptr;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_GPU_STREAM_TEST_H_

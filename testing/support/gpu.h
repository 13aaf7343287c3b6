#ifndef MLA_TAIL_TESTING_SUPPORT_GPU_H_
#define MLA_TAIL_TESTING_SUPPORT_GPU_H_

// GPU gating shared by every GPU test, benchmark and the demo. Without a usable GPU a GPU test
// skips and says why; with MLA_TAIL_REQUIRE_GPU=1 in the environment it fails instead, so a run
// that was meant to use the GPU can never pass by skipping.

#include <initializer_list>
#include <vector>

#include "absl/status/status.h"

namespace mla_tail_testing {

inline constexpr char kRequireGpuVariable[] = "MLA_TAIL_REQUIRE_GPU";
// How many GPUs a run requires: tests that need more GPUs than present fail instead of skipping
// when this says that many are required (the staged runner sets it to the GPUs it sees).
inline constexpr char kRequireGpusVariable[] = "MLA_TAIL_REQUIRE_GPUS";

// True when the environment says a GPU is required: MLA_TAIL_REQUIRE_GPU set, not "0", or
// MLA_TAIL_REQUIRE_GPUS at least 1.
bool GpuRequired();

// OK when device 0 is a usable sm_90 GPU; otherwise why not.
absl::Status GpuUsable();

// OK when devices 0..count-1 are usable sm_90 GPUs; otherwise why not.
absl::Status GpusUsable(int count);

// The number in MLA_TAIL_REQUIRE_GPUS (0 when unset or not a number).
int RequiredGpus();

// The test profile: MLA_TAIL_TEST_PROFILE unset, empty or "full" runs every shape and loop as
// written; "sanitize" runs the GPU tests under compute-sanitizer within minutes (tools 10-100x
// slower), with smaller batches and fewer rounds, replays and threads. The profile shrinks what
// a test repeats, never what it covers: every fused kernel and launch form, both paths, the
// graphs and the faults still run. Any other value is a mistake and ends the process.
inline constexpr char kTestProfileVariable[] = "MLA_TAIL_TEST_PROFILE";
bool SanitizerProfile();

// `full` in the full profile, `sanitize` in the sanitizer profile.
template <typename T>
T ForProfile(T full, T sanitize) {
  return SanitizerProfile() ? sanitize : full;
}
// The same for lists, as a loop takes them: for (int rows : ForProfile({...}, {...})).
template <typename T>
std::vector<T> ForProfile(std::initializer_list<T> full, std::initializer_list<T> sanitize) {
  return SanitizerProfile() ? std::vector<T>(sanitize) : std::vector<T>(full);
}

}  // namespace mla_tail_testing

// First statement of a GPU test (or its fixture's SetUp): skips, or fails when a GPU is required.
#define MLA_REQUIRE_GPU_OR_SKIP()                                                        \
  do {                                                                                   \
    const absl::Status _gpu = ::mla_tail_testing::GpuUsable();                           \
    if (!_gpu.ok()) {                                                                    \
      if (::mla_tail_testing::GpuRequired()) {                                           \
        GTEST_FAIL() << "a GPU is required (" << ::mla_tail_testing::kRequireGpuVariable \
                     << " is set) but none is usable: " << _gpu;                         \
      } else {                                                                           \
        GTEST_SKIP() << "no usable GPU, GPU test skipped (set "                          \
                     << ::mla_tail_testing::kRequireGpuVariable                          \
                     << "=1 to fail instead): " << _gpu;                                 \
      }                                                                                  \
    }                                                                                    \
  } while (false)

// First statement of a test that needs `count` GPUs: skips when fewer are usable, or fails when
// MLA_TAIL_REQUIRE_GPUS says at least `count` are required.
#define MLA_REQUIRE_GPUS_OR_SKIP(count)                                            \
  do {                                                                             \
    MLA_REQUIRE_GPU_OR_SKIP();                                                     \
    const absl::Status _gpus = ::mla_tail_testing::GpusUsable(count);              \
    if (!_gpus.ok()) {                                                             \
      if (::mla_tail_testing::RequiredGpus() >= (count)) {                         \
        GTEST_FAIL() << (count) << " GPUs are required ("                          \
                     << ::mla_tail_testing::kRequireGpusVariable << " = "          \
                     << ::mla_tail_testing::RequiredGpus() << ") but: " << _gpus;  \
      } else {                                                                     \
        GTEST_SKIP() << "needs " << (count) << " GPUs, skipped (set "              \
                     << ::mla_tail_testing::kRequireGpusVariable << "=" << (count) \
                     << " to fail instead): " << _gpus;                            \
      }                                                                            \
    }                                                                              \
  } while (false)

#endif  // MLA_TAIL_TESTING_SUPPORT_GPU_H_

#include "testing/support/gpu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mla/internal/cuda_status.h"

namespace mla_tail_testing {

bool GpuRequired() {
  const char* value = std::getenv(kRequireGpuVariable);
  // Requiring N >= 1 GPUs requires one.
  return (value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0) ||
         RequiredGpus() >= 1;
}

absl::Status GpuUsable() { return mla_tail::internal::CheckDevice(0); }

absl::Status GpusUsable(int count) {
  for (int device = 0; device < count; ++device) {
    MLA_RETURN_IF_ERROR(mla_tail::internal::CheckDevice(device));
  }
  return absl::OkStatus();
}

int RequiredGpus() {
  const char* value = std::getenv(kRequireGpusVariable);
  return value == nullptr ? 0 : std::atoi(value);
}

bool SanitizerProfile() {
  // Read once: every test of a process sees the same profile.
  static const bool sanitize = [] {
    const char* value = std::getenv(kTestProfileVariable);
    if (value == nullptr || *value == '\0' || std::strcmp(value, "full") == 0) return false;
    if (std::strcmp(value, "sanitize") == 0) return true;
    std::fprintf(stderr, "%s=%s: unknown test profile (full or sanitize)\n", kTestProfileVariable,
                 value);
    std::exit(2);
  }();
  return sanitize;
}

}  // namespace mla_tail_testing

#include "testing/gpu.h"

#include <cstdlib>
#include <cstring>

#include "mla/cuda_status.h"

namespace mla_testing {

bool GpuRequired() {
  const char* value = std::getenv(kRequireGpuVariable);
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

absl::Status GpuUsable() { return mla::CheckDevice(0); }

}  // namespace mla_testing

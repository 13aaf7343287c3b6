#include "demo/memory.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>

#include "absl/status/status.h"
#include "mla/internal/cuda_status.h"

namespace mla_tail_demo {

absl::StatusOr<MemorySample> SampleMemory() {
  size_t free_bytes = 0, total_bytes = 0;
  MLA_RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return absl::InternalError("cannot open /proc/self/statm");
  long size_pages = 0, resident_pages = 0;
  const int read = std::fscanf(statm, "%ld %ld", &size_pages, &resident_pages);
  std::fclose(statm);
  if (read != 2) return absl::InternalError("cannot read /proc/self/statm");
  return MemorySample{static_cast<int64_t>(total_bytes - free_bytes),
                      int64_t{resident_pages} * sysconf(_SC_PAGESIZE)};
}

}  // namespace mla_tail_demo

#ifndef TESTING_LATE_WRITER_H_
#define TESTING_LATE_WRITER_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mla_testing {

struct LateCopy {
  const void* src;
  void* dst;
  size_t bytes;  // a multiple of 16
};

// An upstream kernel that lets its dependents launch at once (launch_dependents first), then
// waits `delay_ns` and only then writes dst = src for each copy: a kernel launched after it with
// PDL that read its inputs before griddepcontrol.wait would read what dst held before.
cudaError_t LaunchLateWriter(const LateCopy (&copies)[3], unsigned delay_ns, cudaStream_t stream);

}  // namespace mla_testing

#endif  // TESTING_LATE_WRITER_H_

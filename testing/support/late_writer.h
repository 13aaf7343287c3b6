#ifndef MLA_TAIL_TESTING_SUPPORT_LATE_WRITER_H_
#define MLA_TAIL_TESTING_SUPPORT_LATE_WRITER_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mla_tail_testing {

struct LateCopy {
  const void* src;
  void* dst;
  size_t bytes;  // any count; src and dst 16-byte aligned
};

// An upstream kernel that lets its dependents launch at once (launch_dependents first), then
// waits `delay_ns` and only then writes dst = src for each copy: a kernel launched after it with
// PDL that read its inputs before griddepcontrol.wait would read what dst held before.
cudaError_t LaunchLateWriter(const LateCopy (&copies)[3], unsigned delay_ns, cudaStream_t stream);

// The control of the experiment: a minimal dependent kernel, launched with PDL, that copies
// dst = src after griddepcontrol.wait and nothing else. After LaunchLateWriter it must see the
// late writes; where it does not, the environment (a tool that does not keep PDL's ordering),
// not the tail, is at fault.
cudaError_t LaunchWaitingCopy(const LateCopy& copy, cudaStream_t stream);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_LATE_WRITER_H_

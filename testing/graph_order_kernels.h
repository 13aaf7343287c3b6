#ifndef MLA_TAIL_TESTING_GRAPH_ORDER_KERNELS_H_
#define MLA_TAIL_TESTING_GRAPH_ORDER_KERNELS_H_

// Two plain kernels for testing/graph_order_gpu_test.cc, nothing of the library: a writer that
// (optionally) lets its dependents launch at once and writes a buffer only after a delay, and a
// reader that (optionally) waits for its programmatic dependencies and counts the words that do
// not hold the writer's value.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace mla_tail_testing {

struct LateWrite {
  uint32_t* buffer;
  size_t words;
  uint32_t value;
  unsigned delay_ns;
  bool trigger_first;  // griddepcontrol.launch_dependents before the delay
};

struct StaleRead {
  const uint32_t* buffer;
  size_t words;
  uint32_t expected;
  unsigned long long* stale;  // += the words that differ from `expected`
  bool wait_first;            // griddepcontrol.wait before reading
};

// The kernels' host-side entries, for kernel nodes, and their launch shapes.
const void* LateWriteKernel();
const void* StaleReadKernel();
inline constexpr unsigned kWriterBlocks = 8, kReaderBlocks = 64, kThreads = 256;

// Stream launches with cudaLaunchKernelEx (the programmatic-stream-serialization attribute set
// to `pdl`), as a runtime's own kernels are launched and captured.
cudaError_t LaunchLateWrite(const LateWrite& p, bool pdl, cudaStream_t stream);
cudaError_t LaunchStaleRead(const StaleRead& p, bool pdl, cudaStream_t stream);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_GRAPH_ORDER_KERNELS_H_

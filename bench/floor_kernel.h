#ifndef BENCH_FLOOR_KERNEL_H_
#define BENCH_FLOOR_KERNEL_H_

#include <cuda_runtime_api.h>

namespace mla_bench {

// An empty kernel of `blocks` blocks (with PDL wait and trigger): the launch floor of a graph node.
cudaError_t LaunchFloorKernel(int blocks, cudaStream_t stream, bool pdl);

}  // namespace mla_bench

#endif  // BENCH_FLOOR_KERNEL_H_

#ifndef MLA_TAIL_BENCH_STREAM_FLOOR_H_
#define MLA_TAIL_BENCH_STREAM_FLOOR_H_

// The streaming floor of S bytes: the time of the fastest plain kernel that reads S bytes once,
// behind a PDL dependency, with L2 cold, when such kernels run back to back in one CUDA graph, as
// the tails of a model's layers do. It is the honest bound for a kernel that has a dependency wait
// and a DRAM ramp: every tail must read its bytes too, and none can start reading its
// upstream-written inputs before the wait.
//
// The kernel: griddepcontrol.wait, then launch_dependents (the next kernel's blocks may take
// their places early), then a grid-stride read of 16-byte words, 4 independent loads in flight a
// thread, 512 threads a block. The grid is k blocks a multiprocessor for k = 1..8 (blocks past
// what fits run as later waves); the floor is the fastest k. Layers rotate through distinct
// buffers whose bytes together exceed three L2s, so every kernel reads from DRAM.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mla_tail_bench {

struct StreamFloorOptions {
  int replays = 20;                         // timed replays of each graph (median)
  int min_layers = 16;                      // kernels a graph, at least
  int max_layers = 256;                     // and at most
  int64_t cold_bytes = int64_t{180} << 20;  // the layers' bytes together, at least
  int max_blocks_per_sm = 8;                // k = 1..max_blocks_per_sm
};

struct StreamFloor {
  double us = 0;                            // per kernel, at the fastest k
  int blocks_per_sm = 0;                    // that k
  int layers = 0;                           // kernels a graph
  std::vector<double> us_by_blocks_per_sm;  // [k - 1]: per kernel at k
};

// Measures the streaming floor of `bytes` on the current device (allocates the layers' buffers
// and frees them). Returns the first CUDA error, or cudaSuccess with `*floor` filled.
cudaError_t MeasureStreamFloor(int64_t bytes, cudaStream_t stream, StreamFloor* floor,
                               const StreamFloorOptions& options = {});

// One streaming read of `bytes` (a multiple of 16) at `src` by `blocks` blocks, launched as the
// floor launches it (with the PDL attribute when `pdl`): for profilers and microbenchmarks.
cudaError_t LaunchStreamRead(const void* src, int64_t bytes, int blocks, cudaStream_t stream,
                             bool pdl);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_STREAM_FLOOR_H_

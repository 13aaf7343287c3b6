#ifndef MLA_TAIL_BENCH_STREAM_FLOOR_H_
#define MLA_TAIL_BENCH_STREAM_FLOOR_H_

// The streaming floor of S bytes: the time of the fastest plain kernel that reads S bytes once,
// behind a PDL dependency, with L2 cold, when such kernels run back to back in one CUDA graph, as
// the tails of a model's layers do. It is the honest bound for a kernel that has a dependency wait
// and a DRAM ramp: every tail must read its bytes too, and none can start reading its
// upstream-written inputs before the wait.
//
// The kernel: griddepcontrol.wait, then launch_dependents (the next kernel's blocks may take
// their places early), then a grid-stride read of 16-byte words. Its shapes: 512 threads a block
// with 4 independent loads in flight a thread (32 KiB a block's pass), and up to 16 MiB also 128
// threads with 4 or 1 (8 and 2 KiB), so that a few MiB spread over every multiprocessor too. The
// grid is k blocks a multiprocessor for k = 1..8, capped at the blocks that have work (blocks past
// what fits run as later waves); the floor is the fastest shape and k. Each timing holds the stream
// until the graph is enqueued (stream_hold.h). Layers rotate through distinct buffers whose bytes
// together exceed three L2s, so every kernel reads from DRAM.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mla_tail_bench {

struct StreamFloorOptions {
  int replays = 20;                         // timed replays of each graph (median)
  int min_layers = 16;                      // kernels a graph, at least
  int max_layers = 512;                     // and at most
  int64_t cold_bytes = int64_t{180} << 20;  // the layers' bytes together, at least
  int max_blocks_per_sm = 8;                // k = 1..max_blocks_per_sm
  bool pdl =
      true;  // launched with the PDL attribute (the tails' embedding; off beside PDL-less tails)
};

// A block shape of the streaming kernel.
struct StreamReadShape {
  int threads = 512;  // a block's
  int loads = 4;      // 16-byte loads in flight a thread
};
inline constexpr StreamReadShape kStreamReadShapes[] = {{512, 4}, {128, 4}, {128, 1}};

struct StreamFloor {
  double us = 0;             // per kernel, at the fastest shape and grid
  StreamReadShape shape;     // that shape
  int blocks = 0;            // and grid
  double blocks_per_sm = 0;  // blocks / multiprocessors: k, or less where fewer blocks have work
  int layers = 0;            // kernels a graph
};

// Measures the streaming floor of `bytes` on the current device (allocates the layers' buffers
// and frees them). Returns the first CUDA error, or cudaSuccess with `*floor` filled.
cudaError_t MeasureStreamFloor(int64_t bytes, cudaStream_t stream, StreamFloor* floor,
                               const StreamFloorOptions& options = {});

// One streaming read of `bytes` (a multiple of 16) at `src` by `blocks` blocks of `shape` (one
// of kStreamReadShapes), launched as the floor launches it (with the PDL attribute when `pdl`):
// for profilers and microbenchmarks.
cudaError_t LaunchStreamRead(const void* src, int64_t bytes, int blocks, cudaStream_t stream,
                             bool pdl, StreamReadShape shape = {});

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_STREAM_FLOOR_H_

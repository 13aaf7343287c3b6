#ifndef MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_
#define MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_

#include <vector>

namespace mla_tail_bench {

struct TileMovementOptions {
  std::vector<int> heads = {8, 12, 16};
  std::vector<int> rows = {16, 32, 64, 128, 256, 512, 1024};
  int layers = 0;  // layers rotated; 0: enough that their bytes exceed 180 MB (L2 cold)
  int replays = 20;
};

// The tiles' data movement alone at each heads x rows (the library's 64-row tiles by cp.async
// and by bulk copies, finer tiles by cp.async), beside the streaming floor of the same bytes
// (bench/tile_movement_probe.cu); prints CSV. Returns 0 on success; exits with a message on a
// CUDA error.
int RunTileMovementProbe(const TileMovementOptions& options);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_

#ifndef MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_
#define MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_

#include <vector>

namespace mla_tail_bench {

// Filled from tile_movement_probe's flags, which hold the defaults.
struct TileMovementOptions {
  std::vector<int> heads;
  std::vector<int> rows;
  int layers;   // layers rotated; 0: enough that their bytes exceed 180 MB (L2 cold)
  int replays;  // graph replays timed, the median reported
};

// The tiles' data movement alone at each heads x rows (the library's 64-row tiles and finer
// ones, each by cp.async with addresses at the copy or computed before the wait, and by bulk
// copies), beside the streaming floor of the same bytes (bench/tile_movement_probe.cu); prints
// CSV. Returns 0 on success; exits with a message on a CUDA error.
int RunTileMovementProbe(const TileMovementOptions& options);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_

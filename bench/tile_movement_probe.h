#ifndef MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_
#define MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_

namespace mla_tail_bench {

// The 64-row tiles' data movement alone at 8-16 heads x 16-1024 rows, by cp.async and by bulk
// copies, beside the streaming floor of the same bytes (bench/tile_movement_probe.cu); prints
// CSV. Returns 0 on success; exits with a message on a CUDA error.
int RunTileMovementProbe();

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_TILE_MOVEMENT_PROBE_H_

// tile_movement_probe: the tiles' data movement alone beside the streaming floor
// (bench/tile_movement_probe.h). A sanitizer run takes one layer and one replay:
//   compute-sanitizer tile_movement_probe --rows=16,100 --layers=1 --replays=1
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/bench_util.h"
#include "bench/tile_movement_probe.h"

ABSL_FLAG(std::string, heads, "8,12,16", "head counts");
ABSL_FLAG(std::string, rows, "16,32,64,128,256,512,1024", "rows (tokens)");
ABSL_FLAG(int, layers, 0, "layers rotated; 0: enough that their bytes exceed 180 MB (L2 cold)");
ABSL_FLAG(int, replays, 20, "graph replays timed (the median is reported)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  mla_tail_bench::TileMovementOptions options;
  options.heads = mla_tail_bench::ParseIntList(absl::GetFlag(FLAGS_heads));
  options.rows = mla_tail_bench::ParseIntList(absl::GetFlag(FLAGS_rows));
  options.layers = absl::GetFlag(FLAGS_layers);
  options.replays = absl::GetFlag(FLAGS_replays);
  for (const int v : options.heads) {
    if (v < 1) options.heads.clear();
  }
  for (const int v : options.rows) {
    if (v < 1) options.rows.clear();
  }
  if (options.heads.empty() || options.rows.empty() || options.layers < 0 || options.replays < 1) {
    std::fprintf(stderr,
                 "tile_movement_probe: --heads and --rows take positive integers, --layers >= 0, "
                 "--replays >= 1\n");
    return 2;
  }
  return mla_tail_bench::RunTileMovementProbe(options);
}

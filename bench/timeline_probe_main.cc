// The main of timeline_probe and timeline_probe_clean (bench/timeline_probe.h):
//   timeline_probe [--e4m3_weights] [--many_heads]
#include <cstdio>
#include <cstring>

#include "bench/timeline_probe.h"

int main(int argc, char** argv) {
  mla_tail_bench::TimelineProbeOptions options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--e4m3_weights") == 0) {
      options.e4m3_weights = true;
    } else if (std::strcmp(argv[i], "--many_heads") == 0) {
      options.many_heads = true;
    } else {
      std::fprintf(stderr, "usage: %s [--e4m3_weights] [--many_heads]\n", argv[0]);
      return 2;
    }
  }
  return mla_tail_bench::RunTimelineProbe(options);
}

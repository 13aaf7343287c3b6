// The main of a probe without options: convert_probe, multicast_probe, sm_ingest_probe. Each
// links one library that defines PROBE_RUN's function.
#include "bench/convert_probe.h"
#include "bench/multicast_probe.h"
#include "bench/sm_ingest_probe.h"

int main() { return mla_tail_bench::PROBE_RUN(); }

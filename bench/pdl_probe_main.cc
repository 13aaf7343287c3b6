// pdl_probe: PDL launch and release latencies on this GPU (bench/pdl_probe.h).
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/pdl_probe.h"

ABSL_FLAG(int, pairs, 200, "upstream/dependent pairs per configuration");
ABSL_FLAG(int, busy_ns, 4000, "upstream work before launch_dependents");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  mla_bench::PdlProbeOptions options;
  options.pairs = absl::GetFlag(FLAGS_pairs);
  options.busy_ns = absl::GetFlag(FLAGS_busy_ns);
  return mla_bench::RunPdlProbe(options);
}

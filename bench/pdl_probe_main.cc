// pdl_probe: PDL launch and release latencies on this GPU (bench/pdl_probe.h).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/pdl_probe.h"

ABSL_FLAG(int, pairs, 200, "upstream/dependent pairs per configuration");
ABSL_FLAG(int, busy_ns, 4000, "upstream work before launch_dependents");
ABSL_FLAG(std::string, epilogues_ns, "0,1000,3000", "upstream work after launch_dependents");
ABSL_FLAG(std::string, dependent_blocks, "48,132", "the dependent's grid");
ABSL_FLAG(std::string, prefetch_words, "0,16", "16-byte loads a dependent thread issues first");
ABSL_FLAG(std::string, upstream_smem, "0", "the upstream kernel's dynamic shared memory (bytes)");
ABSL_FLAG(std::string, dependent_smem, "0", "the dependent's dynamic shared memory (bytes)");

namespace {

bool ParseList(const std::string& text, std::vector<int>* out) {
  out->clear();
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(item, &value) || value < 0) return false;
    out->push_back(value);
  }
  return !out->empty();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  mla_tail_bench::PdlProbeOptions options;
  options.pairs = absl::GetFlag(FLAGS_pairs);
  options.busy_ns = absl::GetFlag(FLAGS_busy_ns);
  if (!ParseList(absl::GetFlag(FLAGS_epilogues_ns), &options.epilogues_ns) ||
      !ParseList(absl::GetFlag(FLAGS_dependent_blocks), &options.dependent_blocks) ||
      !ParseList(absl::GetFlag(FLAGS_prefetch_words), &options.prefetch_words) ||
      !ParseList(absl::GetFlag(FLAGS_upstream_smem), &options.upstream_smem_bytes) ||
      !ParseList(absl::GetFlag(FLAGS_dependent_smem), &options.dependent_smem_bytes)) {
    std::fprintf(stderr, "pdl_probe: a list flag is not a comma-separated list of integers >= 0\n");
    return 2;
  }
  return mla_tail_bench::RunPdlProbe(options);
}

#include "demo/report.h"

#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mla_tail_demo {

void PrintStepLine(const Config& c, const StepOutcome& s) {
  const mla_tail::GraphSetStats& before = s.before;
  const mla_tail::GraphSetStats& after = s.after;
  std::string line = absl::StrFormat(
      "step %3d  rows %4d (bucket %4d, q %d)  replays %d  node updates +%d", s.step, s.batch->rows,
      s.bucket, c.q, after.replays - before.replays, after.node_updates - before.node_updates);
  if (after.instantiations != before.instantiations) {
    absl::StrAppend(&line, "  instantiations +", after.instantiations - before.instantiations);
  }
  absl::StrAppendFormat(&line, "  host %.1f us/replay  stream %.1f us  ",
                        s.times.host_us / c.layers, s.times.gpu_ms * 1e3);
  if (s.layers_failed == 0) {
    absl::StrAppend(&line, "check ok (", s.rows_checked, " rows)");
  } else {
    absl::StrAppend(&line, "check FAILED: ", s.layers_failed, " of ", s.layers_checked, " layers, ",
                    s.log->mismatches, " mismatches (", s.rows_checked, " rows)");
  }
  absl::PrintF("%s\n", line);
  for (const std::string& report : s.log->first) absl::PrintF("    %s\n", report);
  std::fflush(stdout);  // a soak cut short, or piped to a file, still shows how far it got
}

std::vector<std::string> PrintSummary(const Config& c, const LoopTotals& totals) {
  std::vector<std::string> failures;
  const mla_tail::GraphSetStats& s = totals.stats;
  const std::optional<MemoryWatch>& memory = totals.memory;
  const int64_t late_instantiations = s.instantiations - totals.warm.instantiations;
  absl::PrintF("summary: %d steps of %d layers, %d replays\n", c.steps, c.layers, s.replays);
  absl::PrintF("  graphs captured %d, instantiations %d (after the %d warm-up steps: %d)\n",
               s.graphs_captured, s.instantiations, kWarmUpSteps, late_instantiations);
  absl::PrintF("  node updates %d, graph memory %.1f MiB\n", s.node_updates,
               MiB(s.graph_memory_bytes));
  absl::PrintF(
      "  Replay host time %.2f us mean; stream time (paced by the host's calls) %.1f us per "
      "step, %.2f us per layer\n",
      totals.host_us / (double{1} * c.steps * c.layers), totals.gpu_ms * 1e3 / c.steps,
      totals.gpu_ms * 1e3 / c.steps / c.layers);
  absl::PrintF("  loop wall time %.1f s, %.2f steps/s (checks and printing included)\n",
               totals.loop_seconds, c.steps / totals.loop_seconds);
  if (c.check_layers == 0) {
    absl::PrintF("  checks (layer-steps): none, not checked (--check_layers=0)\n");
  } else {
    absl::PrintF("  checks (layer-steps): %d passed, %d failed\n", totals.checks_passed,
                 totals.checks_failed);
  }
  if (totals.checks_failed > 0) {
    failures.push_back(absl::StrCat(totals.checks_failed, " checks failed"));
  }
  // Captured ahead of time, the loop may only update graphs, never instantiate them again.
  if (c.capture_all && late_instantiations > 0) {
    failures.push_back(
        absl::StrCat(late_instantiations, " instantiations after warm-up; expected none"));
  }

  if (!memory.has_value()) {
    absl::PrintF("  memory: not watched, fewer steps than the %d warm-up steps\n", kWarmUpSteps);
  } else {
    // Lazily captured graphs legitimately take device and host memory as buckets come up.
    const bool check = c.capture_all && c.watch_memory;
    const char* checked = !c.watch_memory  ? " (not checked: --watch_memory=false)"
                          : !c.capture_all ? " (not checked: --capture_all=false)"
                                           : "";
    const int64_t device_growth = memory->max.device_bytes - memory->warm.device_bytes;
    const int64_t rss_growth = memory->max.rss_bytes - memory->warm.rss_bytes;
    absl::PrintF(
        "  device memory in use: %.1f MiB after warm-up, %.1f MiB at the end, %.1f MiB max; "
        "growth allowed: none%s\n",
        MiB(memory->warm.device_bytes), MiB(memory->last.device_bytes),
        MiB(memory->max.device_bytes), checked);
    absl::PrintF(
        "  host RSS: %.1f MiB after warm-up, %.1f MiB at the end, %.1f MiB max; "
        "growth allowed: %d MiB%s\n",
        MiB(memory->warm.rss_bytes), MiB(memory->last.rss_bytes), MiB(memory->max.rss_bytes),
        c.max_rss_growth_mib, checked);
    if (check && device_growth > 0) {
      failures.push_back(
          absl::StrFormat("device memory in use grew by %.1f MiB after warm-up; expected none",
                          MiB(device_growth)));
    }
    if (check && rss_growth > int64_t{c.max_rss_growth_mib} << 20) {
      failures.push_back(absl::StrFormat(
          "host RSS grew by %.1f MiB after warm-up, more than --max_rss_growth_mib=%d",
          MiB(rss_growth), c.max_rss_growth_mib));
    }
  }
  return failures;
}

}  // namespace mla_tail_demo

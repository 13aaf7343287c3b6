#ifndef MLA_TAIL_DEMO_REPORT_H_
#define MLA_TAIL_DEMO_REPORT_H_

// What the decode demo prints: a line per step (every --print_every steps, and always when the
// step fails the run), and the closing summary, which also decides what fails the run.

#include <optional>
#include <string>
#include <vector>

#include "demo/check.h"
#include "demo/config.h"
#include "demo/data.h"
#include "demo/memory.h"
#include "demo/step.h"
#include "mla_tail/graph/tail_graph_set.h"

namespace mla_tail_demo {

// A step's outcome, for its line.
struct StepOutcome {
  int step = 0;
  const Batch* batch = nullptr;
  int bucket = 0;
  mla_tail::GraphSetStats before, after;  // the set's counters around the step's replays
  StepTimes times;
  int rows_checked = 0, layers_checked = 0, layers_failed = 0;
  const CheckLog* log = nullptr;
};

void PrintStepLine(const Config& c, const StepOutcome& s);

// The loop's totals, for the summary.
struct LoopTotals {
  mla_tail::GraphSetStats stats;  // the set's counters at the end
  mla_tail::GraphSetStats warm;   // and after the warm-up steps
  double host_us = 0, gpu_ms = 0, loop_seconds = 0;
  int checks_passed = 0, checks_failed = 0;
  std::optional<MemoryWatch> memory;  // from the end of the warm-up steps on
};

// Prints the summary; returns what fails the run (nothing when it passed).
std::vector<std::string> PrintSummary(const Config& c, const LoopTotals& totals);

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_REPORT_H_

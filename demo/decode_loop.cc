#include "demo/decode_loop.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "demo/check.h"
#include "demo/data.h"
#include "demo/memory.h"
#include "demo/report.h"
#include "demo/step.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/fill.h"
#include "testing/support/test_values.h"

namespace mla_tail_demo {
namespace {

using mla_tail::GraphSetOptions;
using mla_tail::GraphSetStats;
using mla_tail::TailGraphSet;
using mla_tail_testing::Values;

constexpr int kMemoryEvery = 1000;  // steps between memory samples (and the last step)

// The graph set of the model's layers, each layer pointed at slot 0 of `m` once its W_UV is
// filled; every graph captured when --capture_all says so.
absl::Status SetUp(const Config& c, const Cuda& cuda, Model& m, TailGraphSet& set) {
  MLA_RETURN_IF_ERROR(m.Allocate());
  for (int layer = 0; layer < c.layers; ++layer) {
    MLA_RETURN_IF_CUDA_ERROR(
        FillTestValues({m.w_uv_of(layer), c.heads, kD, kL, int64_t{kD} * kL, kL},
                       Seed(c.seed, Data::kWeights, 0, layer), Values::kUniform, cuda.stream),
        "fill w_uv");
    MLA_RETURN_IF_ERROR(set.SetLayer(layer, m.Buffers(0, layer)));
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(cuda.stream), "set-up");
  absl::PrintF(
      "decode_demo: heads %d, layers %d, q %d, path %s, %d buckets (%d..%d rows), "
      "batches up to %d rows, %d steps\n",
      c.heads, c.layers, c.q, mla_tail::TailPathName(c.path), c.buckets.size(), c.buckets.front(),
      c.buckets.back(), c.max_rows, c.steps);
  if (c.capture_all) {
    const absl::Time begin = absl::Now();
    MLA_RETURN_IF_ERROR(set.CaptureAll());
    absl::PrintF("CaptureAll: %d graphs in %.2f s, graph memory %.1f MiB\n",
                 set.stats().graphs_captured, absl::ToDoubleSeconds(absl::Now() - begin),
                 MiB(set.stats().graph_memory_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDemo(const Config& c) {
  Cuda cuda;
  MLA_RETURN_IF_ERROR(cuda.Create());
  GraphSetOptions options;
  options.heads = c.heads;
  options.q = c.q;
  options.layers = c.layers;
  options.buckets = c.buckets;
  options.path = c.path;
  absl::StatusOr<std::unique_ptr<TailGraphSet>> created = TailGraphSet::Create(0, options);
  if (!created.ok()) return created.status();
  TailGraphSet* set = created->get();
  Model m(c, set->buckets().back());
  MLA_RETURN_IF_ERROR(SetUp(c, cuda, m, *set));

  LoopTotals totals;
  totals.warm = set->stats();  // after the warm-up steps, once there have been that many
  // One layer's output on the host, allocated (and zeroed, so resident) before the warm-up.
  std::vector<uint16_t> output_host(m.row_elements());
  int previous_requests = 0;
  const absl::Time loop_begin = absl::Now();
  for (int step = 0; step < c.steps; ++step) {
    const Batch batch = DrawBatch(c, step, previous_requests);
    previous_requests = static_cast<int>(batch.lengths.size());
    absl::StatusOr<int> bucket = set->BucketRows(batch.rows);
    if (!bucket.ok()) return bucket.status();
    std::vector<int> checked_layers;  // spread over the model, rotating with the step
    const int check_count = std::min(c.check_layers, c.layers);
    for (int i = 0; i < check_count; ++i) {
      checked_layers.push_back((i * c.layers / check_count + step) % c.layers);
    }

    StepOutcome outcome;
    outcome.step = step;
    outcome.batch = &batch;
    outcome.bucket = *bucket;
    outcome.layers_checked = check_count;
    outcome.before = set->stats();
    absl::StatusOr<StepTimes> times =
        RunStep(c, m, batch, *bucket, step, checked_layers, set, cuda);
    if (!times.ok()) return times.status();
    outcome.after = set->stats();
    outcome.times = *times;
    totals.host_us += times->host_us;
    totals.gpu_ms += times->gpu_ms;

    CheckLog log;
    outcome.log = &log;
    for (int layer : checked_layers) {
      const int mismatches = log.mismatches;
      absl::StatusOr<int> rows = CheckLayer(c, m, batch, *bucket, step, layer, &output_host, &log);
      if (!rows.ok()) return rows.status();
      outcome.rows_checked += *rows;
      if (log.mismatches > mismatches) ++outcome.layers_failed;
    }
    totals.checks_passed += check_count - outcome.layers_failed;
    totals.checks_failed += outcome.layers_failed;

    const bool last = step + 1 == c.steps;
    // A step that fails the run prints whatever --print_every says.
    const bool late_instantiation = c.capture_all && step >= kWarmUpSteps &&
                                    outcome.after.instantiations != outcome.before.instantiations;
    if (step % c.print_every == 0 || last || outcome.layers_failed > 0 || late_instantiation) {
      PrintStepLine(c, outcome);
    }
    if (step + 1 == kWarmUpSteps) totals.warm = outcome.after;

    // The first sample, at the end of the warm-up, is the baseline.
    if (step + 1 >= kWarmUpSteps &&
        (!totals.memory.has_value() || (step + 1) % kMemoryEvery == 0 || last)) {
      absl::StatusOr<MemorySample> sample = SampleMemory();
      if (!sample.ok()) return sample.status();
      if (totals.memory.has_value()) {
        totals.memory->Add(*sample);
      } else {
        totals.memory.emplace(*sample);
      }
      absl::PrintF("memory after step %d: device %.1f MiB in use, host RSS %.1f MiB\n", step,
                   MiB(sample->device_bytes), MiB(sample->rss_bytes));
      std::fflush(stdout);
    }
  }
  totals.loop_seconds = absl::ToDoubleSeconds(absl::Now() - loop_begin);
  totals.stats = set->stats();

  const std::vector<std::string> failures = PrintSummary(c, totals);
  if (!failures.empty()) return absl::InternalError(absl::StrJoin(failures, "; "));
  return absl::OkStatus();
}

}  // namespace mla_tail_demo

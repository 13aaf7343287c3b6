// decode_demo, the README's main command (tools/demo.sh). Plays a decode loop through a
// mla_tail::TailGraphSet. The model's W_UV stays put while the activations alternate between two
// buffer slots, so every layer's pointers change every step and each replay updates its graph in
// place. Each step draws a batch
// (some steps repeat the previous size, some jump across buckets) in which about one request in
// five has finished (length 0), replays every layer, then checks a few layers and rows against
// the CPU reference, the padding rows (+0.0) and the first rows past the bucket (left
// untouched). Prints one line per step (or every --print_every steps, failed steps always), then
// a summary of captures, instantiations, updates, times and memory. It fails on a mismatch, on
// an instantiation after warm-up, or on memory growth after warm-up (device memory at all, host
// RSS past --max_rss_growth_mib; both only with --capture_all, as lazy captures add memory).
//
//   bazel run //demo:decode_demo -- --layers=61 --steps=40
//   decode_demo --steps=10000 --print_every=500      # the soak: one GPU, every step checked
//
// Without a usable GPU it runs the CPU reference over one small step and exits 0, or 1 when
// MLA_TAIL_REQUIRE_GPU=1 is set.
//
// This file holds the flags (here, so that --help lists them) and the entry point; data.h the
// data and the device buffers, step.h a step on the device, check.h the check against the CPU
// reference, report.h the step lines and the summary, decode_loop.h the loop.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "demo/config.h"
#include "demo/data.h"
#include "demo/decode_loop.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/buckets.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/gpu.h"
#include "testing/support/reference.h"

ABSL_FLAG(int, heads, 12, "local heads H");
ABSL_FLAG(int, layers, 61, "layers of the model");
ABSL_FLAG(int, q, 1, "tokens per request");
ABSL_FLAG(std::string, buckets, "", "bucket rows, comma-separated; empty: DefaultBuckets(q)");
ABSL_FLAG(int, steps, 40, "decode steps");
ABSL_FLAG(int, max_rows, 256, "the largest batch (rows) a step draws; <= the largest bucket");
ABSL_FLAG(int, check_layers, 3, "layers per step checked against the CPU reference");
ABSL_FLAG(int, check_rows, 4, "rows per checked layer compared with the CPU reference");
ABSL_FLAG(uint64_t, seed, 1, "seed of the batches, lengths and test data");
ABSL_FLAG(std::string, path, "auto", "the tail's path: auto, fused or bmm");
ABSL_FLAG(bool, capture_all, true, "capture every graph before the loop (false: on first use)");
ABSL_FLAG(int, print_every, 1,
          "print every N-th step's line; a failed step's line and the last step's always print");
ABSL_FLAG(int, max_rss_growth_mib, 16, "host RSS growth allowed after the warm-up steps, MiB");
ABSL_FLAG(bool, watch_memory, true,
          "fail on memory growth after warm-up: the device's memory in use, which counts every "
          "process's allocations (false on a shared GPU, and under compute-sanitizer, whose own "
          "allocations change the device's free memory)");
namespace mla_tail_demo {
namespace {

absl::StatusOr<Config> ParseConfig() {
  Config c;
  c.heads = absl::GetFlag(FLAGS_heads);
  c.layers = absl::GetFlag(FLAGS_layers);
  c.q = absl::GetFlag(FLAGS_q);
  c.steps = absl::GetFlag(FLAGS_steps);
  c.max_rows = absl::GetFlag(FLAGS_max_rows);
  c.check_layers = absl::GetFlag(FLAGS_check_layers);
  c.check_rows = absl::GetFlag(FLAGS_check_rows);
  c.seed = absl::GetFlag(FLAGS_seed);
  c.capture_all = absl::GetFlag(FLAGS_capture_all);
  c.watch_memory = absl::GetFlag(FLAGS_watch_memory);
  c.print_every = absl::GetFlag(FLAGS_print_every);
  c.max_rss_growth_mib = absl::GetFlag(FLAGS_max_rss_growth_mib);
  const std::string path = absl::GetFlag(FLAGS_path);
  if (path != "auto" && path != "fused" && path != "bmm") {
    return absl::InvalidArgumentError(absl::StrCat("--path=", path, " is not auto, fused or bmm"));
  }
  c.path = path == "fused" ? mla_tail::TailPath::kFused
           : path == "bmm" ? mla_tail::TailPath::kBmm
                           : mla_tail::TailPath::kAuto;
  if (c.q < 1 || c.q > mla_tail::kMaxQ) {
    return absl::InvalidArgumentError(
        absl::StrCat("--q=", c.q, " is outside [1, ", mla_tail::kMaxQ, "]"));
  }
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_buckets), ',', absl::SkipEmpty())) {
    int rows = 0;
    if (!absl::SimpleAtoi(part, &rows)) {
      return absl::InvalidArgumentError(absl::StrCat("--buckets: '", part, "' is not a number"));
    }
    c.buckets.push_back(rows);
  }
  if (c.buckets.empty()) c.buckets = mla_tail::DefaultBuckets(c.q);
  MLA_RETURN_IF_ERROR(mla_tail::ValidateBuckets(c.buckets, c.q));
  if (c.max_rows < c.q || c.max_rows > c.buckets.back()) {
    return absl::InvalidArgumentError(absl::StrCat("--max_rows=", c.max_rows,
                                                   " is outside [q = ", c.q,
                                                   ", the largest bucket ", c.buckets.back(), "]"));
  }
  if (c.layers < 1 || c.steps < 1 || c.check_layers < 0 || c.check_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need --layers >= 1, --steps >= 1, --check_layers >= 0, --check_rows >= 1; got ", c.layers,
        ", ", c.steps, ", ", c.check_layers, ", ", c.check_rows));
  }
  if (c.print_every < 1 || c.max_rss_growth_mib < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("need --print_every >= 1, --max_rss_growth_mib >= 0; got ", c.print_every,
                     ", ", c.max_rss_growth_mib));
  }
  return c;
}

// Without a GPU: the CPU reference over one small step, through the accessors the GPU check
// uses, so that the data and the math can be looked at anywhere.
int RunWithoutGpu(const Config& c, const absl::Status& why) {
  absl::PrintF("decode_demo: no usable GPU: %s\n", why.ToString());
  if (mla_tail_testing::GpuRequired()) {
    absl::FPrintF(stderr, "decode_demo: %s is set, so a GPU is required: failing\n",
                  mla_tail_testing::kRequireGpuVariable);
    return 1;
  }
  constexpr int kHeads = 4, kRows = 3, kLayers = 2, kHead = 1, kColumns = 4;
  std::vector<int32_t> lengths = DrawLengths(c.seed, 0, kRows);
  lengths[1] = 0;  // a finished request, whose row is +0.0
  absl::PrintF(
      "CPU reference, one step: heads %d, rows %d, q 1, layers %d; head %d, columns 0..%d\n",
      kHeads, kRows, kLayers, kHead, kColumns - 1);
  for (int layer = 0; layer < kLayers; ++layer) {
    const mla_tail_testing::ReferenceInputs in = StepInputs(kHeads, 1, c.seed, 0, layer, lengths);
    for (int t = 0; t < kRows; ++t) {
      std::string line = absl::StrFormat("  layer %d row %d (length %4d):", layer, t, lengths[t]);
      for (int d = 0; d < kColumns; ++d) {
        const mla_tail_testing::ReferenceElement e =
            mla_tail_testing::ReferenceOutput(in, t, kHead, d);
        absl::StrAppendFormat(&line, "  %+9.5f (0x%04x)", mla_tail_testing::Bf16ToFloat(e.out),
                              e.out);
      }
      absl::PrintF("%s\n", line);
    }
  }
  absl::PrintF("GPU part skipped: no usable GPU (set %s=1 to fail instead)\n",
               mla_tail_testing::kRequireGpuVariable);
  return 0;
}

int Main() {
  const absl::StatusOr<Config> config = ParseConfig();
  if (!config.ok()) {
    absl::FPrintF(stderr, "decode_demo: %s\n", config.status().ToString());
    return 1;
  }
  if (absl::Status gpu = mla_tail_testing::GpuUsable(); !gpu.ok())
    return RunWithoutGpu(*config, gpu);
  if (absl::Status status = RunDemo(*config); !status.ok()) {
    absl::FPrintF(stderr, "decode_demo: %s\n", status.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace mla_tail_demo

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return mla_tail_demo::Main();
}

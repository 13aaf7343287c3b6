// The live row count and the pointer checks, measured.
//
// Device time: at each (heads, bucket, live rows), these tails side by side, each the per-layer
// time of the tails of enough layers to keep L2 cold, captured into one graph and replayed:
//   counted   the bucket's tail with TailBuffers::row_count = live (the rows past it skipped);
//   early     the same, the count marked as written before the upstream kernel
//             (row_count_before_upstream: the kernels read it before their dependency wait);
//   readable  counted, with rows_past_count_readable (rows past the count may be read, so the
//             count is read beside the latent rather than before it);
//   padded    the same bucket without a count (every row computed, as a padded replay is);
//   exact     the tail of exactly the live rows, no padding.
// The five are measured in turn, --rounds times (the median of each is reported), so that the
// comparison does not depend on the order of the measurements.
// The goals: a counted tail <= padded + 0.1 us everywhere, and within 0.1 us of padded when
// every row is live. With --gate=false the same without a gate.
//
// Host time: MlaTail::Run at 12 x 1, TailGraphSet::SetLayer and TailNode::Update, each with the
// cached pointer checks and with full checks (TailOptions::full_pointer_checks), and the checks
// alone (the difference is what the checks add to each call).

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/median.h"
#include "bench/output_check.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/pointer_checks.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"

ABSL_FLAG(std::string, heads, "12,64", "head counts");
ABSL_FLAG(std::string, buckets, "16,64", "bucket rows");
ABSL_FLAG(bool, gate, true, "with a gate (false: the tail without one, DeepSeek-V3 style)");
ABSL_FLAG(int, replays, 20, "graph replays timed (the median is reported)");
ABSL_FLAG(int, rounds, 5, "rounds of the four tails in turn (the median of each is reported)");
ABSL_FLAG(int, host_calls, 20000, "calls timed for each host-time figure");
ABSL_FLAG(std::string, csv, "", "append the device-time rows to this CSV file");
ABSL_FLAG(std::string, commit, "unknown", "the commit measured, for the record");

namespace mla_tail_bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTails = 5;  // counted, early, readable, padded, exact
constexpr const char* kTailNames[kTails] = {"counted", "early", "readable", "padded", "exact"};

// The per-layer time of `layers` tails of `shape`, captured into one graph (L2 cold).
absl::StatusOr<double> PerLayer(mla_tail::MlaTail& tail, const mla_tail::TailShape& shape,
                                const std::vector<mla_tail::TailBuffers>& layers,
                                cudaStream_t stream) {
  absl::StatusOr<double> us = TimeCapturedGraph(
      stream,
      [&](cudaStream_t s) {
        for (const mla_tail::TailBuffers& b : layers) MLA_RETURN_IF_ERROR(tail.Run(shape, b, s));
        return absl::OkStatus();
      },
      absl::GetFlag(FLAGS_replays));
  if (!us.ok()) return us.status();
  return *us / layers.size();
}

absl::Status DeviceTimes(cudaStream_t stream, FILE* csv) {
  const bool gated = absl::GetFlag(FLAGS_gate);
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, {});
  if (!tail.ok()) return tail.status();
  mla_tail_testing::DeviceMemory count;
  MLA_RETURN_IF_ERROR(count.Reset(sizeof(int32_t)));
  std::printf("%-6s %-7s %-5s %-11s %-10s %-12s %-10s %-10s %-10s\n", "heads", "bucket", "live",
              "counted_us", "early_us", "readable_us", "padded_us", "exact_us", "kernel");
  for (int heads : ParseIntList(absl::GetFlag(FLAGS_heads))) {
    for (int bucket : ParseIntList(absl::GetFlag(FLAGS_buckets))) {
      const mla_tail::TailShape shape{heads, bucket, 1};
      // Cold for the tail that moves the fewest bytes: one live row.
      const int count_layers = LayersForColdL2(
          TailBytes({heads, 1, 1}, mla_tail::WeightType::kBf16, mla_tail::OutputType::kBf16, gated),
          16, 256);
      absl::StatusOr<std::vector<Layer>> layers = MakeLayers(shape, count_layers, stream);
      if (!layers.ok()) return layers.status();
      std::vector<mla_tail::TailBuffers> padded, counted, early, readable;
      for (const Layer& l : *layers) {
        mla_tail::TailBuffers b = l.buffers;
        if (!gated) b.gate = nullptr;
        padded.push_back(b);
        b.row_count = count.as<int32_t>();
        counted.push_back(b);
        b.rows_past_count_readable = true;
        readable.push_back(b);
        b.rows_past_count_readable = false;
        b.row_count_before_upstream = true;
        early.push_back(b);
      }
      for (int live : {1, bucket / 2, bucket}) {
        MLA_RETURN_IF_CUDA_ERROR(
            cudaMemcpy(count.get(), &live, sizeof(live), cudaMemcpyHostToDevice), "count");
        MLA_RETURN_IF_CUDA_ERROR(cudaDeviceSynchronize(), "count");
        // The tails in turn, each round starting one further on, so that a drift of the
        // GPU's clocks over the run falls on each alike; the median of each tail's rounds.
        const std::vector<mla_tail::TailBuffers>* buffers[kTails] = {&counted, &early, &readable,
                                                                     &padded, &padded};
        const mla_tail::TailShape shapes[kTails] = {shape, shape, shape, shape, {heads, live, 1}};
        // What each tail computes, checked once before it is timed: the live rows against the
        // reference and the rows past them untouched (the padded tail computes every row).
        for (int i = 0; i < kTails; ++i) {
          MLA_RETURN_IF_ERROR(PoisonOutputs(*layers, stream));
          for (const mla_tail::TailBuffers& b : *buffers[i]) {
            MLA_RETURN_IF_ERROR((*tail)->Run(shapes[i], b, stream));
          }
          const absl::Status checked =
              CheckOutputs(shape, *layers, stream, false, i == 3 ? -1 : live, gated);
          if (!checked.ok()) {
            return absl::InternalError(absl::StrCat("the ", kTailNames[i], " tail at live ", live,
                                                    ": ", checked.message()));
          }
        }
        std::vector<double> us[kTails];
        const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
        for (int round = 0; round < rounds; ++round) {
          for (int i = 0; i < kTails; ++i) {
            const int which = (round + i) % kTails;
            absl::StatusOr<double> t = PerLayer(**tail, shapes[which], *buffers[which], stream);
            if (!t.ok()) return t.status();
            us[which].push_back(*t);
          }
        }
        double median[kTails];
        for (int i = 0; i < kTails; ++i) median[i] = Median(us[i]);
        const char* kernel = mla_tail::FusedKernelName((*tail)->FusedKernelFor(shape));
        std::printf("%-6d %-7d %-5d %-11.2f %-10.2f %-12.2f %-10.2f %-10.2f %-10s\n", heads, bucket,
                    live, median[0], median[1], median[2], median[3], median[4], kernel);
        if (csv != nullptr) {
          std::fprintf(csv, "%s,%s,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%s\n",
                       absl::GetFlag(FLAGS_commit).c_str(), gated ? "gated" : "no_gate", heads,
                       bucket, live, median[0], median[1], median[2], median[3], median[4], kernel);
        }
      }
    }
  }
  return absl::OkStatus();
}

// Host microseconds per call of `call`, over --host_calls calls (the stream drained every 1000).
template <typename F>
absl::StatusOr<double> HostMicros(cudaStream_t stream, F call) {
  const int calls = absl::GetFlag(FLAGS_host_calls);
  double total = 0;
  for (int done = 0; done < calls;) {
    const int batch = std::min(1000, calls - done);
    const auto start = Clock::now();
    for (int i = 0; i < batch; ++i) MLA_RETURN_IF_ERROR(call());
    total += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    done += batch;
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "drain");
  }
  return total / calls;
}

absl::Status HostTimes(cudaStream_t stream) {
  const mla_tail::TailShape shape{12, 1, 1};
  absl::StatusOr<std::vector<Layer>> layers = MakeLayers({12, 16, 1}, 2, stream);
  if (!layers.ok()) return layers.status();
  const mla_tail::TailBuffers a = (*layers)[0].buffers, b = (*layers)[1].buffers;
  std::printf("\nhost time per call, us (12 heads)\n%-34s %-8s %-8s\n", "call", "cached", "full");
  auto row = [](const char* name, double cached, double full) {
    std::printf("%-34s %-8.3f %-8.3f\n", name, cached, full);
  };
  double run[2], checks[2], set_layer[2], update[2];
  double validate[2], guard_scope[2], node_checks[2], set_params[2];  // the parts of Update
  for (int full = 0; full < 2; ++full) {
    mla_tail::TailOptions options;
    options.full_pointer_checks = full == 1;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    if (!tail.ok()) return tail.status();
    absl::StatusOr<double> t = HostMicros(stream, [&] { return (*tail)->Run(shape, a, stream); });
    if (!t.ok()) return t.status();
    run[full] = *t;
    const auto mode = full ? mla_tail::internal::PointerCheck::kEveryCall
                           : mla_tail::internal::PointerCheck::kCached;
    t = HostMicros(stream, [&] {
      mla_tail::internal::DeviceGuard guard;
      MLA_RETURN_IF_ERROR(guard.Enter(0));
      return mla_tail::internal::CheckTailBuffers(0, shape, a, mode);
    });
    if (!t.ok()) return t.status();
    checks[full] = *t;

    mla_tail::GraphSetOptions set_options;
    set_options.heads = 12;
    set_options.layers = 1;
    set_options.buckets = {1, 16};
    set_options.full_pointer_checks = full == 1;
    absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> set =
        mla_tail::TailGraphSet::Create(0, set_options);
    if (!set.ok()) return set.status();
    int i = 0;
    t = HostMicros(stream, [&] { return (*set)->SetLayer(0, ++i % 2 ? a : b); });
    if (!t.ok()) return t.status();
    set_layer[full] = *t;

    cudaGraph_t graph = nullptr;
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphCreate(&graph, 0), "cudaGraphCreate");
    absl::StatusOr<mla_tail::TailNode> node = mla_tail::AddTailNode(**tail, graph, {}, shape, a);
    if (!node.ok()) return node.status();
    cudaGraphExec_t exec = nullptr;
    MLA_RETURN_IF_CUDA_ERROR(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    t = HostMicros(stream, [&] { return node->Update(exec, ++i % 2 ? a : b); });
    // The parts of an update, each alone: validation, the error-state scope with the device
    // guard, the pointer checks, and CUDA's own node update with the parameters the node holds.
    cudaKernelNodeParams params = {};
    const std::function<absl::Status()> parts[] = {
        [&] { return mla_tail::ValidateTail(shape, ++i % 2 ? a : b); },
        [&] {
          mla_tail::internal::CudaErrorScope errors;
          mla_tail::internal::DeviceGuard guard;
          return guard.Enter(0);
        },
        [&] { return mla_tail::internal::CheckTailBuffers(0, shape, ++i % 2 ? a : b, mode); },
        [&] {
          return mla_tail::internal::CudaStatus(
              cudaGraphExecKernelNodeSetParams(exec, node->node(), &params),
              "cudaGraphExecKernelNodeSetParams");
        }};
    double* part_times[] = {&validate[full], &guard_scope[full], &node_checks[full],
                            &set_params[full]};
    if (t.ok()) {
      update[full] = *t;
      const cudaError_t got = cudaGraphKernelNodeGetParams(node->node(), &params);
      if (got != cudaSuccess) t = mla_tail::internal::CudaStatus(got, "get params");
    }
    for (int part = 0; part < 4 && t.ok(); ++part) {
      t = HostMicros(stream, parts[part]);
      if (t.ok()) *part_times[part] = *t;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    if (!t.ok()) return t.status();
  }
  row("MlaTail::Run (12 x 1)", run[0], run[1]);
  row("  of it: the pointer checks", checks[0], checks[1]);
  row("TailGraphSet::SetLayer", set_layer[0], set_layer[1]);
  row("TailNode::Update", update[0], update[1]);
  row("  of it: validation", validate[0], validate[1]);
  row("  of it: error scope, device guard", guard_scope[0], guard_scope[1]);
  row("  of it: the pointer checks", node_checks[0], node_checks[1]);
  row("  of it: CUDA's node update", set_params[0], set_params[1]);
  return absl::OkStatus();
}

int Main() {
  if (const absl::Status gpu = mla_tail_testing::GpuUsable(); !gpu.ok()) {
    std::printf("no usable GPU: %s\n", std::string(gpu.message()).c_str());
    return mla_tail_testing::GpuRequired() ? 1 : 0;
  }
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return 1;
  std::printf("row_count_bench: %s, commit %s\n", DeviceDescription().c_str(),
              absl::GetFlag(FLAGS_commit).c_str());
  FILE* csv = nullptr;
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    csv = std::fopen(absl::GetFlag(FLAGS_csv).c_str(), "a");
    if (csv == nullptr) return 1;
  }
  absl::Status status = DeviceTimes(stream, csv);
  if (status.ok()) status = HostTimes(stream);
  if (csv != nullptr) std::fclose(csv);
  cudaStreamDestroy(stream);
  if (!status.ok()) {
    std::printf("failed: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace mla_tail_bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return mla_tail_bench::Main();
}

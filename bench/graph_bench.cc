// Host-side costs of the graph set, for the README and the choice of update mechanism:
// ahead-of-time and lazy capture (time, graph memory), Replay() against a bare cudaGraphLaunch
// of the same executable graph, and a pointer update + replay by the set's kernel-node
// parameter updates against whole-graph updates (the layer's tail captured anew with
// MlaTail::Run and cudaGraphExecUpdate, done here).
//
//   graph_bench --heads=12 --layers=61 --csv=graph_bench.csv

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "testing/support/gpu.h"

ABSL_FLAG(int, heads, 12, "local heads");
ABSL_FLAG(int, layers, 61, "layers");
ABSL_FLAG(int, iterations, 100, "timed passes over all layers");
ABSL_FLAG(std::string, csv, "", "append results to this CSV file");
ABSL_FLAG(std::string, commit, "unknown", "the commit measured, for the record");

namespace mla_tail_bench {
namespace {

using Clock = std::chrono::steady_clock;
using mla_tail::GraphSetOptions;
using mla_tail::TailGraphSet;

struct Row {
  std::string what;
  double value;
  std::string unit;
};

// Mean host microseconds per call of `call(layer)` over iterations x layers calls; the stream is
// drained between passes (untimed) so that the launch queue never blocks the host.
absl::StatusOr<double> HostMicros(int layers, int iterations, cudaStream_t stream,
                                  const std::function<absl::Status(int, int)>& call) {
  double total = 0;
  for (int i = -3; i < iterations; ++i) {
    const auto start = Clock::now();
    for (int layer = 0; layer < layers; ++layer) MLA_RETURN_IF_ERROR(call(i, layer));
    const auto stop = Clock::now();
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "pass");
    if (i >= 0) total += std::chrono::duration<double, std::micro>(stop - start).count();
  }
  return total / (double(iterations) * layers);
}

// Pointer updates by whole-graph update, for comparison with the set's kernel-node updates: one
// graph per layer (rows = 1) captured from MlaTail::Run; an update captures the layer's tail anew
// with the other buffer set and updates the executable graph from it (cudaGraphExecUpdate).
class WholeGraphUpdates {
 public:
  static absl::StatusOr<std::unique_ptr<WholeGraphUpdates>> Create(int heads,
                                                                   mla_tail::TailPath path,
                                                                   const std::vector<Layer>& ping,
                                                                   const std::vector<Layer>& pong) {
    std::unique_ptr<WholeGraphUpdates> w(new WholeGraphUpdates());
    w->shape_ = {heads, 1, 1};
    w->path_ = path;
    w->sets_[0] = &ping;
    w->sets_[1] = &pong;
    mla_tail::TailOptions options;
    options.bmm = path == mla_tail::TailPath::kBmm;
    options.max_heads = heads;
    options.max_rows = 1;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
    if (!tail.ok()) return tail.status();
    w->tail_ = *std::move(tail);
    if (options.bmm) MLA_RETURN_IF_ERROR(w->tail_->PrepareBmm(w->shape_, ping[0].buffers));
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&w->capture_, cudaStreamNonBlocking),
                             "cudaStreamCreate");
    w->execs_.resize(ping.size(), nullptr);
    for (size_t l = 0; l < ping.size(); ++l) {
      absl::StatusOr<cudaGraph_t> graph = w->Capture(static_cast<int>(l), 0);
      if (!graph.ok()) return graph.status();
      const cudaError_t e = cudaGraphInstantiate(&w->execs_[l], *graph, 0);
      cudaGraphDestroy(*graph);
      MLA_RETURN_IF_CUDA_ERROR(e, "cudaGraphInstantiate");
    }
    return w;
  }
  ~WholeGraphUpdates() {
    for (cudaGraphExec_t e : execs_) {
      if (e != nullptr) cudaGraphExecDestroy(e);
    }
    if (capture_ != nullptr) cudaStreamDestroy(capture_);
  }

  absl::Status UpdateAndLaunch(int layer, int set, cudaStream_t stream) {
    absl::StatusOr<cudaGraph_t> graph = Capture(layer, set);
    if (!graph.ok()) return graph.status();
    cudaGraphExecUpdateResultInfo info;
    const cudaError_t e = cudaGraphExecUpdate(execs_[layer], *graph, &info);
    cudaGraphDestroy(*graph);
    MLA_RETURN_IF_CUDA_ERROR(e, "cudaGraphExecUpdate");
    return Launch(layer, stream);
  }

  absl::Status Launch(int layer, cudaStream_t stream) {
    return mla_tail::internal::CudaStatus(cudaGraphLaunch(execs_[layer], stream),
                                          "cudaGraphLaunch");
  }

 private:
  WholeGraphUpdates() = default;

  absl::StatusOr<cudaGraph_t> Capture(int layer, int set) {
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal),
                             "cudaStreamBeginCapture");
    const absl::Status run = tail_->Run(shape_, (*sets_[set])[layer].buffers, capture_, path_);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(capture_, &graph);
    if (!run.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return run;
    }
    MLA_RETURN_IF_CUDA_ERROR(ended, "cudaStreamEndCapture");
    return graph;
  }

  mla_tail::TailShape shape_;
  mla_tail::TailPath path_ = mla_tail::TailPath::kFused;
  const std::vector<Layer>* sets_[2] = {nullptr, nullptr};
  std::unique_ptr<mla_tail::MlaTail> tail_;
  cudaStream_t capture_ = nullptr;
  std::vector<cudaGraphExec_t> execs_;
};

int Main() {
  if (absl::Status gpu = mla_tail_testing::GpuUsable(); !gpu.ok()) {
    std::fprintf(stderr, "graph_bench: no usable GPU: %s\n", gpu.ToString().c_str());
    return mla_tail_testing::GpuRequired() ? 1 : 0;
  }
  const int heads = absl::GetFlag(FLAGS_heads), layer_count = absl::GetFlag(FLAGS_layers);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::vector<Row> rows;
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "graph_bench: %s\n", s.ToString().c_str());
    return 1;
  };

  // Two buffer sets per layer at the largest default bucket (512 rows): double-buffered
  // activations, so that updates have somewhere to point.
  const mla_tail::TailShape largest{heads, 512, 1};
  absl::StatusOr<std::vector<Layer>> ping = MakeLayers(largest, layer_count, stream);
  if (!ping.ok()) return fail(ping.status());
  absl::StatusOr<std::vector<Layer>> pong = MakeLayers(largest, layer_count, stream);
  if (!pong.ok()) return fail(pong.status());
  const std::vector<Layer>* sets[2] = {&*ping, &*pong};

  auto make_set = [&](mla_tail::TailPath path) -> absl::StatusOr<std::unique_ptr<TailGraphSet>> {
    GraphSetOptions options;
    options.heads = heads;
    options.layers = layer_count;
    options.path = path;
    absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
    if (!set.ok()) return set.status();
    for (int l = 0; l < layer_count; ++l) {
      MLA_RETURN_IF_ERROR((*set)->SetLayer(l, (*ping)[l].buffers));
    }
    return set;
  };

  // Ahead-of-time capture of every default bucket for every layer.
  absl::StatusOr<std::unique_ptr<TailGraphSet>> ahead = make_set(mla_tail::TailPath::kAuto);
  if (!ahead.ok()) return fail(ahead.status());
  const absl::Time start = absl::Now();
  if (absl::Status s = (*ahead)->CaptureAll(); !s.ok()) return fail(s);
  const double aot_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const auto& stats = (*ahead)->stats();
  rows.push_back({absl::StrCat("ahead-of-time capture, ", stats.graphs_captured, " graphs (",
                               layer_count, " layers x ", (*ahead)->buckets().size(), " buckets)"),
                  aot_seconds, "s"});
  rows.push_back({"  per graph (capture + instantiate + upload)",
                  aot_seconds / stats.graphs_captured * 1e6, "us"});
  rows.push_back({"  graph memory", stats.graph_memory_bytes / 1048576.0, "MiB"});
  rows.push_back({"  scratch besides the graphs (the BMM path's; path auto)",
                  stats.scratch_bytes / 1048576.0, "MiB"});

  // Lazy capture: the first replay of each bucket of one layer.
  absl::StatusOr<std::unique_ptr<TailGraphSet>> lazy = make_set(mla_tail::TailPath::kAuto);
  if (!lazy.ok()) return fail(lazy.status());
  const absl::Time lazy_start = absl::Now();
  for (int b : (*lazy)->buckets()) {
    if (absl::Status s = (*lazy)->Replay(0, b, stream); !s.ok()) return fail(s);
  }
  cudaStreamSynchronize(stream);
  rows.push_back({"lazy capture, first replay of a bucket (incl. its replay)",
                  absl::ToDoubleSeconds(absl::Now() - lazy_start) / (*lazy)->buckets().size() * 1e6,
                  "us"});
  lazy->reset();

  // Replay() against a bare cudaGraphLaunch of the same executable graph (rows = 1).
  std::vector<cudaGraphExec_t> bare(layer_count);
  for (int l = 0; l < layer_count; ++l) {
    absl::StatusOr<cudaGraph_t> graph = (*ahead)->ExportGraph(l, 1);
    if (!graph.ok()) return fail(graph.status());
    if (cudaGraphInstantiate(&bare[l], *graph, 0) != cudaSuccess) return 1;
    cudaGraphDestroy(*graph);
  }
  absl::StatusOr<double> launch = HostMicros(layer_count, iterations, stream, [&](int, int l) {
    return mla_tail::internal::CudaStatus(cudaGraphLaunch(bare[l], stream), "launch");
  });
  absl::StatusOr<double> replay = HostMicros(
      layer_count, iterations, stream, [&](int, int l) { return (*ahead)->Replay(l, 1, stream); });
  if (!launch.ok() || !replay.ok()) return fail(launch.ok() ? replay.status() : launch.status());
  rows.push_back({"bare cudaGraphLaunch (rows 1)", *launch, "us/call"});
  rows.push_back({"Replay(), pointers unchanged", *replay, "us/call"});
  rows.push_back({"  Replay() - bare launch", *replay - *launch, "us/call"});

  // Pointer update + replay, each mechanism, each path: every call switches buffer sets.
  for (mla_tail::TailPath path : {mla_tail::TailPath::kFused, mla_tail::TailPath::kBmm}) {
    for (const bool whole : {false, true}) {
      std::unique_ptr<TailGraphSet> set;
      std::unique_ptr<WholeGraphUpdates> recapture;
      if (whole) {
        absl::StatusOr<std::unique_ptr<WholeGraphUpdates>> made =
            WholeGraphUpdates::Create(heads, path, *sets[0], *sets[1]);
        if (!made.ok()) return fail(made.status());
        recapture = *std::move(made);
      } else {
        absl::StatusOr<std::unique_ptr<TailGraphSet>> made = make_set(path);
        if (!made.ok()) return fail(made.status());
        set = *std::move(made);
        for (int l = 0; l < layer_count; ++l) {  // capture bucket 1 before timing
          if (absl::Status s = set->Replay(l, 1, stream); !s.ok()) return fail(s);
        }
      }
      absl::StatusOr<double> updated = HostMicros(
          layer_count, whole ? iterations / 10 + 1 : iterations, stream, [&](int i, int l) {
            if (whole) return recapture->UpdateAndLaunch(l, (i + 3) % 2, stream);
            MLA_RETURN_IF_ERROR(set->SetLayer(l, (*sets[(i + 3) % 2])[l].buffers));
            return set->Replay(l, 1, stream);
          });
      if (!updated.ok()) return fail(updated.status());
      absl::StatusOr<double> plain = HostMicros(layer_count, iterations, stream, [&](int, int l) {
        return whole ? recapture->Launch(l, stream) : set->Replay(l, 1, stream);
      });
      if (!plain.ok()) return fail(plain.status());
      const std::string name = absl::StrCat(mla_tail::TailPathName(path), " path, ",
                                            whole ? "whole-graph update" : "kernel-node update");
      rows.push_back({absl::StrCat(name, ": update + replay"), *updated, "us/call"});
      rows.push_back({absl::StrCat(name, ": plain replay"), *plain, "us/call"});
      rows.push_back({absl::StrCat(name, ": update cost"), *updated - *plain, "us/call"});
    }
  }
  for (cudaGraphExec_t e : bare) cudaGraphExecDestroy(e);

  const std::string device = DeviceDescription();
  const std::string date = absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone());
  std::printf("# graph_bench  commit %s  %s  %s  heads %d  layers %d\n",
              absl::GetFlag(FLAGS_commit).c_str(), device.c_str(), date.c_str(), heads,
              layer_count);
  std::ofstream csv;
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    csv.open(absl::GetFlag(FLAGS_csv), std::ios::app);
    csv << "# graph_bench commit " << absl::GetFlag(FLAGS_commit) << ", " << device << ", " << date
        << ", heads " << heads << ", layers " << layer_count << "\nmeasure,value,unit\n";
  }
  for (const Row& r : rows) {
    std::printf("%-70s %10.3f %s\n", r.what.c_str(), r.value, r.unit.c_str());
    if (csv.is_open()) csv << '"' << r.what << "\"," << r.value << "," << r.unit << "\n";
  }
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace
}  // namespace mla_tail_bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return mla_tail_bench::Main();
}

// The tail's speed per layer on the GPU, with L2 kept cold by rotating through enough layers,
// beside its limits (bytes at the measured copy bandwidth, FLOPs at the measured bf16 matrix
// rate, the launch floor, the streaming floor of the same bytes: bench/stream_floor.h) and the
// unfused peer (strided cuBLASLt batched GEMM + a gate kernel with PDL, bench/peer.h). Two
// measurements:
//   - embedded (modes fused, bmm, auto, peer): every layer's tail captured into ONE CUDA graph,
//     as a runtime embeds the tails in its step graph; the median of --replays replays of that
//     graph, divided by the layers.
//   - back-to-back replays (modes fused-replay, bmm-replay, auto-replay): a TailGraphSet with one
//     graph per layer, launched one after another with TailGraphSet::Replay (a cudaGraphLaunch
//     each); --replays rounds over all layers between two CUDA events, divided by the calls.
//     The host time per Replay call is printed and recorded too.
// The fused path with its kernel forced (TailOptions::fused_kernel), embedded or replayed:
// fused-<kernel> with <kernel> a mla_tail::FusedKernelName (fused-ColumnSplit,
// fused-Tile64x64Pipeline4, ...), and each with -replay.
// e4m3 (embedded only): fp8w-<mode> runs <mode> (fused, auto, fused-<kernel>) with e4m3 W_UV,
// fp8o-<mode> with the e4m3 output, fp8w-fp8o-<mode> with both; fp8o-pair (and fp8w-fp8o-pair)
// is the unfused peer of the e4m3 output: the dispatched bf16-output tail, then
// bench/group_quant.cu's quantization kernel, both with PDL. Their limits count e4m3 bytes.
// Without a gate: nogate-<mode> runs any mode but peer and the pairs with gate == nullptr (its
// limits count no gate bytes), so that gated and ungated tails alternate in one process:
// --modes=auto,nogate-auto,auto,nogate-auto.
//
//   tail_bench --heads=8,12,64 --rows=1,16,256 --modes=fused,auto,auto-replay --csv=out.csv
//   tail_bench --heads=12,64,128 --rows=64,256,1024
//   --modes=fused-Tile64x64Pipeline4,fused-Persistent128x128

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"
#include "bench/group_quant.h"
#include "bench/limit_kernels.h"
#include "bench/output_check.h"
#include "bench/peer.h"
#include "bench/stream_floor.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"

ABSL_FLAG(std::string, heads, "8,12,16,32,64,96,128", "head counts");
ABSL_FLAG(std::string, rows, "1,2,4,8,16,32,64,128,256,512,1024", "rows (tokens)");
ABSL_FLAG(std::string, q, "1", "tokens per request");
ABSL_FLAG(std::string, modes, "fused,bmm,auto,peer,auto-replay",
          "comma-separated: fused, bmm, auto (dispatched), peer, all layers in one graph; "
          "fused-replay, bmm-replay, auto-replay: one TailGraphSet graph per layer, replayed back "
          "to back; fused-<kernel> (and -replay): the fused path with its kernel forced, "
          "<kernel> a fused kernel's name (ColumnSplit, LatentSplit, Tile64x64Pipeline4, ...: "
          "mla_tail::FusedKernelName)");
ABSL_FLAG(int, min_layers, 16, "layers rotated at least");
ABSL_FLAG(int, max_layers, 512, "layers rotated at most");
ABSL_FLAG(int, replays, 20,
          "timed replays of each graph; in the -replay modes, timed rounds over all layers");
ABSL_FLAG(std::string, csv, "", "append results to this CSV file");
ABSL_FLAG(std::string, commit, "unknown", "the commit measured, for the record");
ABSL_FLAG(bool, upstream, false,
          "instead of the grid: the tail's added time after an upstream kernel (the modes of "
          "--upstream_modes), heads and rows from the flags");
ABSL_FLAG(std::string, upstream_modes, "up,up+pdl,up+nopdl",
          "with --upstream, comma-separated: up (the upstream kernel alone), up+pdl and up+nopdl "
          "(then the dispatched tail, with PDL and without), each also as nogate-up+pdl and "
          "nogate-up+nopdl");
ABSL_FLAG(int, upstream_busy_ns, 4000, "the upstream kernel's work before launch_dependents");
ABSL_FLAG(int, upstream_epilogue_ns, 1000, "the upstream kernel's work after launch_dependents");
ABSL_FLAG(int, upstream_smem_bytes, 100 << 10,
          "the upstream kernel's dynamic shared memory a block (attention kernels hold much)");
ABSL_FLAG(bool, upstream_writes_latent, true,
          "the upstream kernel rewrites the tail's latent after launch_dependents, as attention "
          "writes it (it is then in L2)");
ABSL_FLAG(std::string, fused_kernel, "auto",
          "the fused kernel of the auto and up modes: auto (the rule) or a kernel's name "
          "(ColumnSplit, Tile64x64Pipeline4, ...)");
ABSL_FLAG(bool, pdl, true, "launch the tail's kernels with PDL (the library's default)");
ABSL_FLAG(bool, upstream_pdl, true, "launch the upstream kernel itself with PDL (after a tail)");
ABSL_FLAG(bool, stream_floor, true,
          "measure each shape's streaming floor of the bytes each mode moves "
          "(bench/stream_floor.h: a plain PDL-dependent streaming read of them, L2 cold, kernels "
          "back to back in one graph)");

namespace mla_tail_bench {
namespace {

constexpr absl::string_view kReplaySuffix = "-replay";
constexpr absl::string_view kPathModes[] = {"fused", "bmm", "auto"};
// The kernels a mode can force: every fused kernel.
const std::vector<mla_tail::FusedKernel> kForcedKernels(std::begin(mla_tail::kFusedKernels),
                                                        std::end(mla_tail::kFusedKernels));

bool IsReplayMode(absl::string_view mode) { return absl::EndsWith(mode, kReplaySuffix); }

// The fused kernel a mode forces ("fused-<kernel name>", with or without -replay); kAuto for
// the other modes.
mla_tail::FusedKernel ModeKernel(absl::string_view mode) {
  absl::ConsumeSuffix(&mode, kReplaySuffix);
  for (mla_tail::FusedKernel v : kForcedKernels) {
    if (mode == absl::StrCat("fused-", mla_tail::FusedKernelName(v))) return v;
  }
  return mla_tail::FusedKernel::kAuto;
}

// A mode's e4m3 prefixes (fp8w-: e4m3 W_UV, fp8o-: the e4m3 output, in that order) and the
// mode they prefix.
struct E4m3Mode {
  bool weight = false, output = false;
  absl::string_view base;
  bool any() const { return weight || output; }
};
E4m3Mode ParseE4m3Mode(absl::string_view mode) {
  E4m3Mode m;
  m.weight = absl::ConsumePrefix(&mode, "fp8w-");
  m.output = absl::ConsumePrefix(&mode, "fp8o-");
  m.base = mode;
  return m;
}

// A mode without its nogate- prefix; `gated` says whether it had none.
absl::string_view WithoutNoGate(absl::string_view mode, bool* gated) {
  *gated = !absl::ConsumePrefix(&mode, "nogate-");
  return mode;
}

bool IsKnownMode(absl::string_view mode) {
  bool gated = true;
  mode = WithoutNoGate(mode, &gated);
  // The peer's gate kernel and the pair's quantization read a gate.
  if (!gated && (mode == "peer" || absl::EndsWith(mode, "pair"))) return false;
  const E4m3Mode e4m3 = ParseE4m3Mode(mode);
  if (e4m3.any()) {
    // The fused path, embedded; the pair needs the e4m3 output.
    if (e4m3.base == "pair") return e4m3.output;
    return !IsReplayMode(e4m3.base) && (e4m3.base == "fused" || e4m3.base == "auto" ||
                                        ModeKernel(e4m3.base) != mla_tail::FusedKernel::kAuto);
  }
  if (mode == "peer" || ModeKernel(mode) != mla_tail::FusedKernel::kAuto) return true;
  absl::ConsumeSuffix(&mode, kReplaySuffix);
  return absl::c_linear_search(kPathModes, mode);
}

bool IsUpstreamMode(absl::string_view mode) {
  bool gated = true;
  mode = WithoutNoGate(mode, &gated);
  return mode == "up+pdl" || mode == "up+nopdl" || (gated && mode == "up");
}

// The path a mode runs: fused (any kernel) and bmm, with or without -replay, force one; the
// rest dispatch.
mla_tail::TailPath ModePath(absl::string_view mode) {
  absl::ConsumeSuffix(&mode, kReplaySuffix);
  return mode == "fused" || absl::StartsWith(mode, "fused-") ? mla_tail::TailPath::kFused
         : mode == "bmm"                                     ? mla_tail::TailPath::kBmm
                                                             : mla_tail::TailPath::kAuto;
}

struct ReplayTiming {
  double gpu_us_per_layer;
  double host_us_per_replay;
};

// The tails as a runtime without a step graph runs them: one TailGraphSet graph per layer (one
// bucket of exactly shape.rows, so no padding), launched back to back with Replay, `rounds`
// rounds over all layers between two events. Each Replay is a host-enqueued cudaGraphLaunch
// (about 2 us of host time), so where a layer's tail is shorter than that the GPU waits on the
// host and the time per layer is the launch rate, not the tail's: that bound is what this
// measures, beside the graph-embedded time. The host time covers the same calls: where the GPU
// is the slower side and the launch queue fills, the host waits too, and its time then tends to
// the GPU's rather than to the enqueue cost alone.
absl::StatusOr<ReplayTiming> TimeBackToBackReplays(const mla_tail::TailShape& shape,
                                                   mla_tail::TailPath path,
                                                   mla_tail::FusedKernel fused_kernel,
                                                   const std::vector<Layer>& layers, int rounds,
                                                   cudaStream_t stream) {
  using mla_tail::TailGraphSet;
  mla_tail::GraphSetOptions options;
  options.heads = shape.heads;
  options.q = shape.q;
  options.layers = static_cast<int>(layers.size());
  options.buckets = {shape.rows};
  options.path = path;
  options.fused_kernel = fused_kernel;
  options.pdl = absl::GetFlag(FLAGS_pdl);
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  if (!set.ok()) return set.status();
  for (int l = 0; l < options.layers; ++l) {
    MLA_RETURN_IF_ERROR((*set)->SetLayer(l, layers[l].buffers));
  }
  MLA_RETURN_IF_ERROR((*set)->CaptureAll());
  auto round = [&]() -> absl::Status {
    for (int l = 0; l < options.layers; ++l) {
      MLA_RETURN_IF_ERROR((*set)->Replay(l, shape.rows, stream));
    }
    return absl::OkStatus();
  };
  MLA_RETURN_IF_ERROR(round());  // warm-up
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "warm-up round");

  cudaEvent_t start, stop;
  MLA_RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  if (const cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    cudaEventDestroy(start);
    return mla_tail::internal::CudaStatus(e, "cudaEventCreate");
  }
  absl::Status status =
      mla_tail::internal::CudaStatus(cudaEventRecord(start, stream), "cudaEventRecord");
  const auto host_start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds && status.ok(); ++r) status = round();
  const auto host_stop = std::chrono::steady_clock::now();
  if (status.ok())
    status = mla_tail::internal::CudaStatus(cudaEventRecord(stop, stream), "cudaEventRecord");
  // Drain the stream even after a failure, so that no replay outlives the events.
  const absl::Status drained =
      mla_tail::internal::CudaStatus(cudaStreamSynchronize(stream), "back-to-back replays");
  if (status.ok()) status = drained;
  float ms = 0;
  if (status.ok()) {
    status = mla_tail::internal::CudaStatus(cudaEventElapsedTime(&ms, start, stop),
                                            "cudaEventElapsedTime");
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  MLA_RETURN_IF_ERROR(status);
  // A capture inside the timed rounds would have been timed as a replay.
  if ((*set)->stats().graphs_captured != options.layers) {
    return absl::InternalError(absl::StrCat("the set captured ", (*set)->stats().graphs_captured,
                                            " graphs for ", options.layers, " layers"));
  }
  const double calls = double(rounds) * options.layers;
  return ReplayTiming{
      1000.0 * ms / calls,
      std::chrono::duration<double, std::micro>(host_stop - host_start).count() / calls};
}

int Main() {
  const bool upstream_run = absl::GetFlag(FLAGS_upstream);
  const std::vector<std::string> modes =
      absl::StrSplit(absl::GetFlag(upstream_run ? FLAGS_upstream_modes : FLAGS_modes), ',');
  for (const std::string& mode : modes) {
    if (!(upstream_run ? IsUpstreamMode(mode) : IsKnownMode(mode))) {
      std::fprintf(stderr, "tail_bench: unknown mode '%s' (see --help)\n", mode.c_str());
      return 1;
    }
  }
  if (absl::GetFlag(FLAGS_replays) < 1) {
    std::fprintf(stderr, "tail_bench: --replays must be at least 1\n");
    return 1;
  }
  if (absl::Status gpu = mla_tail_testing::GpuUsable(); !gpu.ok()) {
    std::fprintf(stderr, "tail_bench: no usable GPU: %s\n", gpu.ToString().c_str());
    return mla_tail_testing::GpuRequired() ? 1 : 0;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  absl::StatusOr<CopyRates> copy_rates = MeasureCopyRates(stream);
  if (!copy_rates.ok()) {
    std::fprintf(stderr, "copy rates: %s\n", copy_rates.status().ToString().c_str());
    return 1;
  }
  const double bandwidth = copy_rates->best();
  absl::StatusOr<double> matrix_rate = MeasureMatrixRate(stream);
  if (!matrix_rate.ok()) {
    std::fprintf(stderr, "matrix rate: %s\n", matrix_rate.status().ToString().c_str());
    return 1;
  }
  // The launch floor: per node of a graph of 64 one-block PDL kernels.
  absl::StatusOr<double> floor = TimeCapturedGraph(
      stream,
      [](cudaStream_t s) {
        for (int i = 0; i < 64; ++i) {
          MLA_RETURN_IF_CUDA_ERROR(LaunchFloorKernel(1, s, true), "floor kernel");
        }
        return absl::OkStatus();
      },
      50);
  const double floor_us = floor.ok() ? *floor / 64 : -1;
  const std::string device = DeviceDescription();
  const std::string date = absl::FormatTime("%Y-%m-%d", absl::Now(), absl::UTCTimeZone());
  std::printf(
      "# tail_bench  commit %s  %s  %s\n# copy rate %.3f TB/s (cudaMemcpyAsync %.3f, "
      "copy kernel %.3f; the higher is the limit's), bf16 matrix rate %.0f TFLOP/s, "
      "launch floor %.2f us/node (PDL, 1 block)\n",
      absl::GetFlag(FLAGS_commit).c_str(), device.c_str(), date.c_str(), bandwidth / 1e12,
      copy_rates->memcpy / 1e12, copy_rates->kernel / 1e12, *matrix_rate / 1e12, floor_us);
  std::printf("%5s %5s %2s %12s %6s %10s %9s %6s %9s %7s %13s\n", "heads", "rows", "q", "mode",
              "layers", "us/layer", "limit us", "eff", "floor us", "/floor", "host us/call");

  std::ofstream csv;
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    csv.open(absl::GetFlag(FLAGS_csv), std::ios::app);
    csv << "# commit " << absl::GetFlag(FLAGS_commit) << ", " << device << ", " << date << ", copy "
        << bandwidth / 1e12 << " TB/s (cudaMemcpyAsync " << copy_rates->memcpy / 1e12
        << ", copy kernel " << copy_rates->kernel / 1e12 << "), matrix " << *matrix_rate / 1e12
        << " TFLOP/s, floor " << floor_us << " us/node\n";
    // host_us_per_replay: the -replay modes only, empty for the others. flop_us: the tail's
    // FLOPs at the matrix rate. limit_us: the tail's bytes at copy_tbs, the higher of the two
    // measured copy rates. stream_floor_us: the streaming floor of bytes_per_layer
    // (bench/stream_floor.h), measured in this run beside the shape's tails (with PDL as they
    // run), at a grid of stream_floor_blocks_per_sm blocks a multiprocessor (fewer than one where
    // fewer blocks have work) of stream_floor_block (threads x loads a thread); empty for the
    // upstream modes (the upstream kernel's time is in theirs) and with --nostream_floor.
    csv << "heads,rows,q,mode,layers,us_per_layer,limit_us,bytes_per_layer,host_us_per_replay,"
           "flop_us,copy_tbs,stream_floor_us,stream_floor_blocks_per_sm,stream_floor_block\n";
  }

  mla_tail::TailOptions options;
  options.max_rows = 4096;
  options.pdl = absl::GetFlag(FLAGS_pdl);
  if (absl::GetFlag(FLAGS_fused_kernel) != "auto") {
    options.fused_kernel = ModeKernel("fused-" + absl::GetFlag(FLAGS_fused_kernel));
    if (options.fused_kernel == mla_tail::FusedKernel::kAuto) {
      std::fprintf(stderr, "--fused_kernel: no kernel is called %s\n",
                   absl::GetFlag(FLAGS_fused_kernel).c_str());
      return 1;
    }
  }
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail = mla_tail::MlaTail::Create(0, options);
  if (!tail.ok()) {
    std::fprintf(stderr, "MlaTail: %s\n", tail.status().ToString().c_str());
    return 1;
  }
  options.pdl = false;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> no_pdl = mla_tail::MlaTail::Create(0, options);
  if (!no_pdl.ok()) {
    std::fprintf(stderr, "MlaTail: %s\n", no_pdl.status().ToString().c_str());
    return 1;
  }
  // One fused-only tail per forced kernel (no BMM scratch to speak of).
  std::vector<std::unique_ptr<mla_tail::MlaTail>> forced(kForcedKernels.size());
  for (size_t i = 0; i < forced.size(); ++i) {
    mla_tail::TailOptions fused_options;
    fused_options.max_heads = 1;
    fused_options.max_rows = 1;
    fused_options.workspace_bytes = 0;
    fused_options.pdl = absl::GetFlag(FLAGS_pdl);
    fused_options.fused_kernel = kForcedKernels[i];
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> t =
        mla_tail::MlaTail::Create(0, fused_options);
    if (!t.ok()) {
      std::fprintf(stderr, "MlaTail: %s\n", t.status().ToString().c_str());
      return 1;
    }
    forced[i] = *std::move(t);
  }
  // The tail a mode runs through: the forced kernel's, or the library's default.
  auto tail_for = [&](absl::string_view mode) -> mla_tail::MlaTail& {
    const mla_tail::FusedKernel kernel = ModeKernel(mode);
    for (size_t i = 0; i < forced.size(); ++i) {
      if (kForcedKernels[i] == kernel) return *forced[i];
    }
    return **tail;
  };
  int failures = 0;
  for (int q : ParseIntList(absl::GetFlag(FLAGS_q))) {
    for (int heads : ParseIntList(absl::GetFlag(FLAGS_heads))) {
      for (int rows : ParseIntList(absl::GetFlag(FLAGS_rows))) {
        if (rows % q != 0) continue;
        const mla_tail::TailShape shape{heads, rows, q};
        // The bytes of a mode's types: e4m3 W_UV or output move a byte a value; without a gate
        // none is read.
        auto mode_bytes = [&](absl::string_view mode) {
          bool gated = true;
          const E4m3Mode e4m3 = ParseE4m3Mode(WithoutNoGate(mode, &gated));
          return TailBytes(
              shape, e4m3.weight ? mla_tail::WeightType::kE4m3 : mla_tail::WeightType::kBf16,
              e4m3.output ? mla_tail::OutputType::kE4m3 : mla_tail::OutputType::kBf16, gated);
        };
        // Layers enough that the mode moving the fewest bytes runs L2-cold too.
        int64_t fewest_bytes = TailBytes(shape);
        for (const std::string& mode : modes) {
          fewest_bytes = std::min(fewest_bytes, mode_bytes(mode));
        }
        const int layer_count = LayersForColdL2(fewest_bytes, absl::GetFlag(FLAGS_min_layers),
                                                absl::GetFlag(FLAGS_max_layers));
        absl::StatusOr<std::vector<Layer>> layers = MakeLayers(shape, layer_count, stream);
        if (!layers.ok()) {
          std::fprintf(stderr, "layers: %s\n", layers.status().ToString().c_str());
          return 1;
        }
        const double flop_us = TailFlops(shape) / *matrix_rate * 1e6;
        // The streaming floor of each byte count the modes move, measured beside the shape's
        // tails, over as many layers a graph as they run (so that a graph's fixed cost is spread
        // alike).
        std::map<int64_t, StreamFloor> stream_floors;
        StreamFloorOptions floor_options;
        floor_options.min_layers = layer_count;
        floor_options.max_layers = layer_count;
        floor_options.pdl = absl::GetFlag(FLAGS_pdl);  // the tails' embedding
        for (const std::string& mode : modes) {
          const int64_t bytes = mode_bytes(mode);
          if (!absl::GetFlag(FLAGS_stream_floor) || stream_floors.count(bytes) > 0) continue;
          if (const cudaError_t e =
                  MeasureStreamFloor(bytes, stream, &stream_floors[bytes], floor_options);
              e != cudaSuccess) {
            std::fprintf(stderr, "stream floor: %s\n", cudaGetErrorString(e));
            return 1;
          }
        }
        auto record = [&](const std::string& mode, double per_layer,
                          std::optional<double> host_us_per_replay) {
          const int64_t bytes = mode_bytes(mode);
          const double limit_us = bytes / bandwidth * 1e6;
          // An upstream mode's time is the upstream kernel's and the tail's together, which the
          // tail's floor (measured without the upstream kernel) does not bound: none is given.
          bool gated_mode = true;
          const bool upstream_mode = WithoutNoGate(mode, &gated_mode).rfind("up", 0) == 0;
          const auto floor_at = stream_floors.find(bytes);
          const StreamFloor stream_floor =
              floor_at != stream_floors.end() && !upstream_mode ? floor_at->second : StreamFloor{};
          const std::string host =
              host_us_per_replay ? absl::StrFormat("%.2f", *host_us_per_replay) : "-";
          std::printf("%5d %5d %2d %12s %6d %10.2f %9.2f %5.0f%% %9.2f %7.2f %13s\n", heads, rows,
                      q, mode.c_str(), layer_count, per_layer, limit_us,
                      100.0 * limit_us / per_layer, stream_floor.us,
                      stream_floor.us > 0 ? per_layer / stream_floor.us : 0.0, host.c_str());
          if (csv.is_open()) {
            csv << heads << "," << rows << "," << q << "," << mode << "," << layer_count << ","
                << per_layer << "," << limit_us << "," << bytes << ",";
            if (host_us_per_replay) csv << *host_us_per_replay;
            csv << "," << flop_us << "," << bandwidth / 1e12 << ",";
            if (stream_floor.us > 0) {
              csv << stream_floor.us << "," << stream_floor.blocks_per_sm << ","
                  << stream_floor.shape.threads << "x" << stream_floor.shape.loads;
            } else {
              csv << ",,";
            }
            csv << "\n";
          }
        };
        std::unique_ptr<Peer> peer;
        // Every timed output checked: poisoned before the timing, sampled against the CPU
        // reference after it ("up" times the upstream kernel alone).
        // Whether the mode's outputs are right (a mode's row is recorded only then: a timing of
        // wrong outputs is no figure).
        auto check = [&](const std::string& mode) {
          if (mode == "up") return true;
          if (const absl::Status s = CheckOutputs(shape, *layers, stream); !s.ok()) {
            std::fprintf(stderr, "tail_bench: MISMATCH in mode %s: %s\n", mode.c_str(),
                         s.ToString().c_str());
            ++failures;
            return false;
          }
          return true;
        };
        // The layers' e4m3 tensors, made when a mode first needs them.
        std::vector<Fp8Layer> fp8_layers;
        for (const std::string& name : modes) {
          // `name` is recorded; `mode` is what runs, with or without the layers' gates.
          bool gated = true;
          const std::string mode(WithoutNoGate(name, &gated));
          for (Layer& layer : *layers) {
            layer.buffers.gate = gated ? layer.gate.as<mla_tail::bf16>() : nullptr;
          }
          const E4m3Mode e4m3 = ParseE4m3Mode(mode);
          if (e4m3.any() && fp8_layers.empty()) {
            absl::StatusOr<std::vector<Fp8Layer>> made = MakeFp8Layers(shape, layer_count, stream);
            if (!made.ok()) {
              std::fprintf(stderr, "e4m3 layers: %s\n", made.status().ToString().c_str());
              return 1;
            }
            fp8_layers = *std::move(made);
          }
          if (e4m3.any()) {
            // The tail a mode runs through (its forced kernel's, or the library's default).
            mla_tail::MlaTail& runner = tail_for(e4m3.base);
            const bool pair = e4m3.base == "pair";
            // Checked as the bf16 modes are: every output poisoned before, sampled after.
            absl::Status poisoned = PoisonOutputs(*layers, stream);
            for (const Fp8Layer& fp8 : fp8_layers) {
              if (!poisoned.ok()) break;
              poisoned = mla_tail::internal::CudaStatus(
                  cudaMemsetAsync(fp8.output.get(), 0xff, fp8.output.bytes(), stream),
                  "poison e4m3 output");
              if (!poisoned.ok()) break;
              poisoned = mla_tail::internal::CudaStatus(
                  cudaMemsetAsync(fp8.output_scales.get(), 0xff, fp8.output_scales.bytes(), stream),
                  "poison e4m3 output scales");
            }
            if (!poisoned.ok()) {
              std::fprintf(stderr, "poison: %s\n", poisoned.ToString().c_str());
              return 1;
            }
            absl::StatusOr<double> us = TimeCapturedGraph(
                stream,
                [&](cudaStream_t s) {
                  for (size_t i = 0; i < layers->size(); ++i) {
                    const Layer& layer = (*layers)[i];
                    const Fp8Layer& fp8 = fp8_layers[i];
                    mla_tail::TailBuffers buffers =
                        Fp8Buffers(shape, layer, fp8, e4m3.weight, e4m3.output && !pair);
                    // The pair's bf16 intermediate: one buffer every layer reuses (layer 0's
                    // output), as a runtime's memory pool would; the quantization kernel reads
                    // what the tail has just written.
                    if (pair) buffers.output = (*layers)[0].buffers.output;
                    MLA_RETURN_IF_ERROR(runner.Run(shape, buffers, s, ModePath(e4m3.base)));
                    if (!pair) continue;
                    const GroupQuantParams quant{buffers.output,
                                                 buffers.output_row_stride,
                                                 fp8.output.as<mla_tail::fp8_e4m3>(),
                                                 int64_t{heads} * mla_tail::kValueDim,
                                                 fp8.output_scales.as<float>(),
                                                 heads,
                                                 rows,
                                                 heads};
                    MLA_RETURN_IF_CUDA_ERROR(LaunchGroupQuant(quant, s, absl::GetFlag(FLAGS_pdl)),
                                             "group quant");
                  }
                  return absl::OkStatus();
                },
                absl::GetFlag(FLAGS_replays));
            if (!us.ok()) {
              std::fprintf(stderr, "%s heads %d rows %d: %s\n", name.c_str(), heads, rows,
                           us.status().ToString().c_str());
              ++failures;
              continue;
            }
            if (const absl::Status s =
                    CheckFp8Outputs(shape, *layers, fp8_layers, e4m3.weight, e4m3.output, stream);
                !s.ok()) {
              std::fprintf(stderr, "tail_bench: MISMATCH in mode %s: %s\n", name.c_str(),
                           s.ToString().c_str());
              ++failures;
              continue;
            }
            record(name, *us / layer_count, std::nullopt);
            continue;
          }
          if (const absl::Status s = PoisonOutputs(*layers, stream); !s.ok()) {
            std::fprintf(stderr, "poison: %s\n", s.ToString().c_str());
            return 1;
          }
          if (IsReplayMode(mode)) {
            absl::StatusOr<ReplayTiming> timing =
                TimeBackToBackReplays(shape, ModePath(mode), ModeKernel(mode), *layers,
                                      absl::GetFlag(FLAGS_replays), stream);
            if (!timing.ok()) {
              std::fprintf(stderr, "%s heads %d rows %d: %s\n", name.c_str(), heads, rows,
                           timing.status().ToString().c_str());
              ++failures;
              continue;
            }
            if (check(name)) record(name, timing->gpu_us_per_layer, timing->host_us_per_replay);
            continue;
          }
          if (mode == "peer" && peer == nullptr) {
            absl::StatusOr<std::unique_ptr<Peer>> p = Peer::Create(shape);
            if (!p.ok()) {
              std::fprintf(stderr, "peer: %s\n", p.status().ToString().c_str());
              ++failures;
              continue;
            }
            peer = *std::move(p);
          }
          const bool upstream = mode.rfind("up", 0) == 0;
          const mla_tail::TailPath path = ModePath(mode);
          mla_tail::MlaTail& runner = tail_for(mode);
          if (path != mla_tail::TailPath::kFused) {
            // Plan outside the capture.
            absl::Status planned = (*tail)->PrepareBmm(shape, (*layers)[0].buffers);
            if (!planned.ok()) std::fprintf(stderr, "plan: %s\n", planned.ToString().c_str());
          }
          absl::StatusOr<double> us = TimeCapturedGraph(
              stream,
              [&](cudaStream_t s) {
                for (size_t l = 0; l < layers->size(); ++l) {
                  const Layer& layer = (*layers)[l];
                  if (upstream) {
                    MLA_RETURN_IF_CUDA_ERROR(
                        LaunchUpstreamKernel(
                            132, absl::GetFlag(FLAGS_upstream_busy_ns),
                            absl::GetFlag(FLAGS_upstream_epilogue_ns),
                            absl::GetFlag(FLAGS_upstream_smem_bytes),
                            absl::GetFlag(FLAGS_upstream_writes_latent) ? layer.latent.get()
                                                                        : nullptr,
                            absl::GetFlag(FLAGS_upstream_writes_latent) ? layer.latent.bytes() : 0,
                            s, absl::GetFlag(FLAGS_upstream_pdl)),
                        "upstream kernel");
                    if (mode == "up") continue;
                  }
                  MLA_RETURN_IF_ERROR(mode == "peer" ? peer->Run(layer.buffers, s)
                                      : mode == "up+nopdl"
                                          ? (*no_pdl)->Run(shape, layer.buffers, s)
                                          : runner.Run(shape, layer.buffers, s, path));
                }
                return absl::OkStatus();
              },
              absl::GetFlag(FLAGS_replays));
          if (!us.ok()) {
            std::fprintf(stderr, "%s heads %d rows %d: %s\n", name.c_str(), heads, rows,
                         us.status().ToString().c_str());
            ++failures;
            continue;
          }
          if (check(name)) record(name, *us / layer_count, std::nullopt);
        }
      }
    }
  }
  cudaStreamDestroy(stream);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mla_tail_bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return mla_tail_bench::Main();
}

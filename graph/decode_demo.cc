// decode_demo: the main job. Plays a decode loop through a mla_graph::TailGraphSet. The model's
// W_UV stays put while the activations alternate between two buffer slots, so every layer's
// pointers change every step and each replay updates its graph in place. Each step draws a batch
// (some steps repeat the previous size, some jump across buckets) in which about one request in
// five has finished (length 0), replays every layer, then checks a few layers and rows against
// the CPU reference, the padding rows (+0.0) and the first rows past the bucket (left
// untouched). Prints one line per step (or every --print_every steps, failed steps always), then
// a summary of captures, instantiations, updates, times and memory. It fails on a mismatch, on
// an instantiation after warm-up, or on memory growth after warm-up (device memory at all, host
// RSS past --max_rss_growth_mib; both only with --capture_all, as lazy captures add memory).
//
//   bazel run //graph:decode_demo -- --layers=61 --steps=40
//   decode_demo --steps=10000 --print_every=500      # the soak: one GPU, every step checked
//
// Without a usable GPU it runs the CPU reference over one small step and exits 0, or 1 when
// MLA_TAIL_REQUIRE_GPU=1 is set.

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "mla_tail/graph/buckets.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/bf16_bits.h"
#include "testing/fill.h"
#include "testing/gpu.h"
#include "testing/problem.h"
#include "testing/reference.h"
#include "testing/test_values.h"

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
          "fail on memory growth after warm-up (false under compute-sanitizer, whose own "
          "allocations change the device's free memory)");

namespace mla_graph {
namespace {

using mla_testing::SplitMix64;
using mla_testing::TestValue;
using mla_testing::Values;

constexpr int kL = mla::kLatentDim;
constexpr int kD = mla::kValueDim;
constexpr int kWarmUpSteps = 2;     // instantiations and memory growth after these are failures
constexpr int kRowsPastBucket = 8;  // rows past the bucket downloaded to see them still poisoned
constexpr int kMemoryEvery = 1000;  // steps between memory samples (and the last step)

struct Config {
  int heads = 0, layers = 0, q = 1, steps = 0, max_rows = 0, check_layers = 0, check_rows = 0;
  int print_every = 1, max_rss_growth_mib = 0;
  uint64_t seed = 0;
  std::vector<int> buckets;
  mla::TailPath path = mla::TailPath::kAuto;
  bool capture_all = true;
  bool watch_memory = true;
};

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
  c.path = path == "fused" ? mla::TailPath::kFused
           : path == "bmm" ? mla::TailPath::kBmm
                           : mla::TailPath::kAuto;
  if (c.q < 1 || c.q > mla::kMaxQ) {
    return absl::InvalidArgumentError(
        absl::StrCat("--q=", c.q, " is outside [1, ", mla::kMaxQ, "]"));
  }
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_buckets), ',', absl::SkipEmpty())) {
    int rows = 0;
    if (!absl::SimpleAtoi(part, &rows)) {
      return absl::InvalidArgumentError(absl::StrCat("--buckets: '", part, "' is not a number"));
    }
    c.buckets.push_back(rows);
  }
  if (c.buckets.empty()) c.buckets = DefaultBuckets(c.q);
  MLA_RETURN_IF_ERROR(ValidateBuckets(c.buckets, c.q));
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

// Seeds of everything drawn, derived the same way by the fills and the reference.
enum class Data : uint64_t { kWeights = 1, kLatent, kGate, kBatch, kLengths, kSample };

uint64_t Seed(uint64_t seed, Data data, uint64_t step, uint64_t index) {
  return SplitMix64(SplitMix64(SplitMix64(seed * 8 + static_cast<uint64_t>(data)) ^ step) ^ index);
}

// The inputs of layer `layer` at step `step`, computed element by element from the seeds and
// logical indices the fills used (W_UV does not depend on the step).
mla_testing::ReferenceInputs StepInputs(int heads, int q, uint64_t seed, int step, int layer,
                                        std::vector<int32_t> lengths) {
  const uint64_t latent_seed = Seed(seed, Data::kLatent, step, layer);
  const uint64_t w_seed = Seed(seed, Data::kWeights, 0, layer);
  const uint64_t gate_seed = Seed(seed, Data::kGate, step, layer);
  const uint64_t width = static_cast<uint64_t>(heads) * kD;
  mla_testing::ReferenceInputs in;
  in.heads = heads;
  in.q = q;
  in.latent = [=](int t, int h, int k) {
    return TestValue(latent_seed, (static_cast<uint64_t>(t) * heads + h) * kL + k,
                     Values::kUniform);
  };
  in.w_uv = [=](int h, int k, int d) {
    return TestValue(w_seed, (static_cast<uint64_t>(h) * kD + d) * kL + k, Values::kUniform);
  };
  in.gate = [=](int t, int column) {
    return TestValue(gate_seed, static_cast<uint64_t>(t) * width + column, Values::kUniformGates);
  };
  in.lengths = [lengths = std::move(lengths)](int request) { return lengths[request]; };
  return in;
}

// One length per request: about one in five finished (0), the others 1..4096.
std::vector<int32_t> DrawLengths(uint64_t seed, int step, int requests) {
  std::vector<int32_t> lengths(requests);
  for (int r = 0; r < requests; ++r) {
    const uint64_t x = Seed(seed, Data::kLengths, step, r);
    lengths[r] = x % 5 == 0 ? 0 : 1 + static_cast<int32_t>((x >> 8) % 4096);
  }
  return lengths;
}

struct Batch {
  int rows = 0;                  // q * requests
  std::vector<int32_t> lengths;  // one per request
};

// A step's batch: a quarter of the steps repeat the previous size, a quarter drift by a few
// requests, the rest draw anew from [1, max_rows / q] requests (mostly another bucket).
Batch DrawBatch(const Config& c, int step, int previous_requests) {
  const uint64_t x = Seed(c.seed, Data::kBatch, step, 0);
  const int max_requests = c.max_rows / c.q;
  int requests = 1 + static_cast<int>(x % max_requests);
  if (previous_requests > 0) {
    const int mode = static_cast<int>((x >> 32) % 4);
    if (mode == 0) requests = previous_requests;
    const int drift = static_cast<int>((x >> 40) % 7) - 3;
    if (mode == 1) requests = std::clamp(previous_requests + drift, 1, max_requests);
  }
  return Batch{requests * c.q, DrawLengths(c.seed, step, requests)};
}

// Rows compared with the reference: the last row, a row of a finished request when there is
// one, then random rows up to `count`.
std::vector<int> SampleRows(const Batch& batch, int q, int count, uint64_t seed) {
  std::set<int> rows = {batch.rows - 1};
  const int requests = static_cast<int>(batch.lengths.size());
  for (int i = 0; i < requests; ++i) {
    const int r = static_cast<int>((seed + i) % requests);
    if (batch.lengths[r] != 0) continue;
    rows.insert(r * q + static_cast<int>((seed >> 32) % q));
    break;
  }
  for (uint64_t i = 0; static_cast<int>(rows.size()) < std::min(count, batch.rows); ++i) {
    rows.insert(static_cast<int>(SplitMix64(seed + i) % batch.rows));
  }
  return {rows.begin(), rows.end()};
}

// W_UV of every layer ([H, 128, 512] each), and two slots of activations: per layer a latent
// [Bmax, H, 512], a gate and an output [Bmax, H * 128], compact, and per slot one lengths array
// of Bmax / q requests.
struct Model {
  Model(const Config& c, int largest_bucket)
      : heads(c.heads), layers(c.layers), bmax(largest_bucket), q(c.q) {}
  const int heads, layers, bmax, q;
  mla_testing::DeviceMemory w_uv, latent[2], gate[2], output[2], lengths[2];

  int64_t width() const { return int64_t{heads} * kD; }
  int64_t latent_elements() const { return int64_t{bmax} * heads * kL; }  // per layer
  int64_t row_elements() const { return bmax * width(); }  // the gate and output of a layer

  absl::Status Allocate() {
    MLA_RETURN_IF_ERROR(w_uv.Reset(static_cast<size_t>(layers) * heads * kD * kL * 2));
    for (int slot = 0; slot < 2; ++slot) {
      MLA_RETURN_IF_ERROR(latent[slot].Reset(layers * latent_elements() * 2));
      MLA_RETURN_IF_ERROR(gate[slot].Reset(layers * row_elements() * 2));
      MLA_RETURN_IF_ERROR(output[slot].Reset(layers * row_elements() * 2));
      MLA_RETURN_IF_ERROR(
          lengths[slot].Reset(static_cast<size_t>(bmax / q) * sizeof(int32_t)));
      // The kernels read the padding rows' latent and gate (their lengths make the output
      // +0.0); NaN there, never garbage, keeps initcheck's view defined and shows the rows
      // are ignored.
      for (const mla_testing::DeviceMemory* m : {&latent[slot], &gate[slot]}) {
        MLA_RETURN_IF_CUDA_ERROR(cudaMemset(m->get(), 0xff, m->bytes()), "poison activations");
      }
    }
    return absl::OkStatus();
  }
  // A layer's tensors as bf16 bits (what the fills write and the check reads).
  uint16_t* w_uv_of(int l) const { return w_uv.as<uint16_t>() + int64_t{l} * heads * kD * kL; }
  uint16_t* latent_of(int s, int l) const { return latent[s].as<uint16_t>() + l * latent_elements(); }
  uint16_t* gate_of(int s, int l) const { return gate[s].as<uint16_t>() + l * row_elements(); }
  uint16_t* output_of(int s, int l) const { return output[s].as<uint16_t>() + l * row_elements(); }

  mla::TailBuffers Buffers(int s, int l) const {
    auto bf16 = [](uint16_t* bits) { return reinterpret_cast<mla::bf16*>(bits); };
    return mla::CompactBuffers({heads, bmax, q}, bf16(latent_of(s, l)), bf16(w_uv_of(l)),
                               bf16(gate_of(s, l)), lengths[s].as<int32_t>(),
                               bf16(output_of(s, l)));
  }
};

// The stream of the loop and the events that time a step's replays.
struct Cuda {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Cuda() = default;
  Cuda(const Cuda&) = delete;
  Cuda& operator=(const Cuda&) = delete;
  ~Cuda() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  absl::Status Create() {
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    MLA_RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "event");
    return mla::CudaStatus(cudaEventCreate(&stop), "event");
  }
};

struct StepTimes {
  double host_us = 0;  // Replay host calls, all layers
  float gpu_ms = 0;    // from before the first replay to after the last, on the GPU
};

// One step on slot step % 2: poison the checked layers' outputs, fill the activations, upload
// the lengths and zero the padding requests', then point every layer at the slot and replay it.
absl::StatusOr<StepTimes> RunStep(const Config& c, const Model& m, const Batch& batch, int bucket,
                                  int step, const std::vector<int>& checked_layers,
                                  TailGraphSet* set, const Cuda& cuda) {
  const int slot = step % 2;
  const cudaStream_t stream = cuda.stream;
  for (int layer : checked_layers) {
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(m.output_of(slot, layer), 0xff, m.row_elements() * 2, stream),
        "poison output");
  }
  for (int layer = 0; layer < c.layers; ++layer) {
    MLA_RETURN_IF_CUDA_ERROR(
        FillTestValues({m.latent_of(slot, layer), batch.rows, c.heads, kL, c.heads * kL, kL},
                       Seed(c.seed, Data::kLatent, step, layer), Values::kUniform, stream),
        "fill latent");
    MLA_RETURN_IF_CUDA_ERROR(
        FillTestValues({m.gate_of(slot, layer), batch.rows, 1, m.width(), m.width(), 0},
                       Seed(c.seed, Data::kGate, step, layer), Values::kUniformGates, stream),
        "fill gate");
  }
  int32_t* lengths = m.lengths[slot].as<int32_t>();
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(lengths, batch.lengths.data(), batch.lengths.size() * sizeof(int32_t),
                      cudaMemcpyHostToDevice, stream),
      "upload lengths");
  MLA_RETURN_IF_ERROR(ZeroPaddingLengths(lengths, batch.rows, bucket, c.q, stream));

  StepTimes times;
  MLA_RETURN_IF_CUDA_ERROR(cudaEventRecord(cuda.start, stream), "record start");
  for (int layer = 0; layer < c.layers; ++layer) {
    MLA_RETURN_IF_ERROR(set->SetLayer(layer, m.Buffers(slot, layer)));
    const absl::Time begin = absl::Now();
    MLA_RETURN_IF_ERROR(set->Replay(layer, batch.rows, stream));
    times.host_us += absl::ToDoubleMicroseconds(absl::Now() - begin);
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaEventRecord(cuda.stop, stream), "record stop");
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), absl::StrCat("step ", step));
  MLA_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&times.gpu_ms, cuda.start, cuda.stop), "elapsed");
  return times;
}

// Mismatches of one check, the first few described.
struct CheckLog {
  std::mutex mutex;
  int mismatches = 0;
  std::vector<std::string> first;
  void Report(std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (++mismatches <= 6) first.push_back(std::move(what));
  }
};

// Downloads a layer's output after a step into `got` (Bmax rows of room) and checks it: every
// row < rows written (+0.0 where the request has finished), the padding rows +0.0, the first
// kRowsPastBucket rows past the bucket still poisoned (0xffff), and the sampled rows, every
// column, against the CPU reference. Only the rows checked travel (a full Bmax download would
// mostly carry poison): the rows right after the bucket are where a replay of too large a
// bucket, or a tile running over, writes first. Returns how many rows were compared with the
// reference.
absl::StatusOr<int> CheckLayer(const Config& c, const Model& m, const Batch& batch, int bucket,
                               int step, int layer, std::vector<uint16_t>* got, CheckLog* log) {
  const int64_t width = m.width();
  const int rows_read = std::min(bucket + kRowsPastBucket, m.bmax);
  MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(got->data(), m.output_of(step % 2, layer),
                                      rows_read * width * 2, cudaMemcpyDeviceToHost),
                           "download output");
  const std::vector<uint16_t>& out = *got;
  for (int t = 0; t < rows_read; ++t) {
    const bool active = t < batch.rows && batch.lengths[t / c.q] > 0;
    for (int64_t column = 0; column < width; ++column) {
      const uint16_t bits = out[t * width + column];
      if (t >= bucket ? bits == 0xffff : (active ? bits != 0xffff : bits == 0)) continue;
      log->Report(absl::StrFormat("layer %d row %d column %d: 0x%04x (rows %d, bucket %d, %s)",
                                  layer, t, column, bits, batch.rows, bucket,
                                  active ? "active" : "inactive"));
      break;
    }
  }

  const std::vector<int> rows =
      SampleRows(batch, c.q, c.check_rows, Seed(c.seed, Data::kSample, step, layer));
  const mla_testing::ReferenceInputs in =
      StepInputs(c.heads, c.q, c.seed, step, layer, batch.lengths);
  const int pairs = static_cast<int>(rows.size()) * c.heads;
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < pairs; i = next++) {
      const int t = rows[i / c.heads], h = i % c.heads;
      for (int d = 0; d < kD; ++d) {
        const mla_testing::ReferenceElement ref = mla_testing::ReferenceOutput(in, t, h, d);
        std::string why;
        if (!mla_testing::OutputAgrees(ref, out[t * width + h * kD + d], /*exact=*/false, &why)) {
          log->Report(
              absl::StrCat("layer ", layer, " row ", t, " head ", h, " column ", d, ": ", why));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  const int count = std::clamp<int>(std::thread::hardware_concurrency(), 1, 16);
  for (int i = 0; i < std::min(count, pairs); ++i) threads.emplace_back(work);
  for (std::thread& thread : threads) thread.join();
  return static_cast<int>(rows.size());
}

struct MemorySample {
  int64_t device_bytes = 0;  // in use on the device: total - free (cudaMemGetInfo)
  int64_t rss_bytes = 0;     // this process's resident set
};

absl::StatusOr<MemorySample> SampleMemory() {
  size_t free_bytes = 0, total_bytes = 0;
  MLA_RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return absl::InternalError("cannot open /proc/self/statm");
  long size_pages = 0, resident_pages = 0;
  const int read = std::fscanf(statm, "%ld %ld", &size_pages, &resident_pages);
  std::fclose(statm);
  if (read != 2) return absl::InternalError("cannot read /proc/self/statm");
  return MemorySample{static_cast<int64_t>(total_bytes - free_bytes),
                      int64_t{resident_pages} * sysconf(_SC_PAGESIZE)};
}

// Memory after the warm-up steps, at the latest sample, and the most seen since warm-up.
struct MemoryWatch {
  MemorySample warm, last, max;
  explicit MemoryWatch(const MemorySample& s) : warm(s), last(s), max(s) {}
  void Add(const MemorySample& s) {
    last = s;
    max.device_bytes = std::max(max.device_bytes, s.device_bytes);
    max.rss_bytes = std::max(max.rss_bytes, s.rss_bytes);
  }
};

double MiB(int64_t bytes) { return bytes / 1048576.0; }

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
  MLA_RETURN_IF_ERROR(m.Allocate());
  for (int layer = 0; layer < c.layers; ++layer) {
    MLA_RETURN_IF_CUDA_ERROR(
        FillTestValues({m.w_uv_of(layer), c.heads, kD, kL, int64_t{kD} * kL, kL},
                       Seed(c.seed, Data::kWeights, 0, layer), Values::kUniform, cuda.stream),
        "fill w_uv");
    MLA_RETURN_IF_ERROR(set->SetLayer(layer, m.Buffers(0, layer)));
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(cuda.stream), "set-up");
  absl::PrintF(
      "decode_demo: heads %d, layers %d, q %d, path %s, %d buckets (%d..%d rows), "
      "batches up to %d rows, %d steps\n",
      c.heads, c.layers, c.q, mla::TailPathName(c.path), c.buckets.size(), c.buckets.front(),
      c.buckets.back(), c.max_rows, c.steps);
  if (c.capture_all) {
    const absl::Time begin = absl::Now();
    MLA_RETURN_IF_ERROR(set->CaptureAll());
    absl::PrintF("CaptureAll: %d graphs in %.2f s, graph memory %.1f MiB\n",
                 set->stats().graphs_captured, absl::ToDoubleSeconds(absl::Now() - begin),
                 MiB(set->stats().graph_memory_bytes));
  }

  GraphSetStats warm = set->stats();  // after the warm-up steps, once there have been that many
  std::optional<MemoryWatch> memory;  // from the end of the warm-up steps on
  // One layer's output on the host, allocated (and zeroed, so resident) before the warm-up.
  std::vector<uint16_t> output_host(m.row_elements());
  double host_us = 0, gpu_ms = 0;
  int checks_passed = 0, checks_failed = 0, previous_requests = 0;
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

    const GraphSetStats before = set->stats();
    absl::StatusOr<StepTimes> times =
        RunStep(c, m, batch, *bucket, step, checked_layers, set, cuda);
    if (!times.ok()) return times.status();
    const GraphSetStats after = set->stats();
    host_us += times->host_us;
    gpu_ms += times->gpu_ms;

    CheckLog log;
    int rows_checked = 0, layers_failed = 0;
    for (int layer : checked_layers) {
      const int mismatches = log.mismatches;
      absl::StatusOr<int> rows = CheckLayer(c, m, batch, *bucket, step, layer, &output_host, &log);
      if (!rows.ok()) return rows.status();
      rows_checked += *rows;
      if (log.mismatches > mismatches) ++layers_failed;
    }
    checks_passed += check_count - layers_failed;
    checks_failed += layers_failed;

    const bool last = step + 1 == c.steps;
    // A step that fails the run prints whatever --print_every says.
    const bool late_instantiation =
        c.capture_all && step >= kWarmUpSteps && after.instantiations != before.instantiations;
    if (step % c.print_every == 0 || last || layers_failed > 0 || late_instantiation) {
      std::string line = absl::StrFormat(
          "step %3d  rows %4d (bucket %4d, q %d)  replays %d  node updates +%d", step, batch.rows,
          *bucket, c.q, after.replays - before.replays, after.node_updates - before.node_updates);
      if (after.instantiations != before.instantiations ||
          after.whole_graph_updates != before.whole_graph_updates) {
        absl::StrAppend(&line, "  instantiations +", after.instantiations - before.instantiations,
                        "  whole-graph updates +",
                        after.whole_graph_updates - before.whole_graph_updates);
      }
      absl::StrAppendFormat(&line, "  host %.1f us/replay  gpu %.1f us  ",
                            times->host_us / c.layers, times->gpu_ms * 1e3);
      if (layers_failed == 0) {
        absl::StrAppend(&line, "check ok (", rows_checked, " rows)");
      } else {
        absl::StrAppend(&line, "check FAILED: ", layers_failed, " of ", check_count, " layers, ",
                        log.mismatches, " mismatches (", rows_checked, " rows)");
      }
      absl::PrintF("%s\n", line);
      for (const std::string& report : log.first) absl::PrintF("    %s\n", report);
      std::fflush(stdout);  // a soak cut short, or piped to a file, still shows how far it got
    }
    if (step + 1 == kWarmUpSteps) warm = after;

    // The first sample, at the end of the warm-up, is the baseline.
    if (step + 1 >= kWarmUpSteps &&
        (!memory.has_value() || (step + 1) % kMemoryEvery == 0 || last)) {
      absl::StatusOr<MemorySample> sample = SampleMemory();
      if (!sample.ok()) return sample.status();
      if (memory.has_value()) {
        memory->Add(*sample);
      } else {
        memory.emplace(*sample);
      }
      absl::PrintF("memory after step %d: device %.1f MiB in use, host RSS %.1f MiB\n", step,
                   MiB(sample->device_bytes), MiB(sample->rss_bytes));
      std::fflush(stdout);
    }
  }
  const double loop_seconds = absl::ToDoubleSeconds(absl::Now() - loop_begin);

  std::vector<std::string> failures;
  const GraphSetStats& s = set->stats();
  const int64_t late_instantiations = s.instantiations - warm.instantiations;
  absl::PrintF("summary: %d steps of %d layers, %d replays\n", c.steps, c.layers, s.replays);
  absl::PrintF("  graphs captured %d, instantiations %d (after the %d warm-up steps: %d)\n",
               s.graphs_captured, s.instantiations, kWarmUpSteps, late_instantiations);
  absl::PrintF("  node updates %d, whole-graph updates %d, graph memory %.1f MiB\n", s.node_updates,
               s.whole_graph_updates, MiB(s.graph_memory_bytes));
  absl::PrintF("  Replay host time %.2f us mean; GPU time %.1f us per step, %.2f us per layer\n",
               host_us / (double{1} * c.steps * c.layers), gpu_ms * 1e3 / c.steps,
               gpu_ms * 1e3 / c.steps / c.layers);
  absl::PrintF("  loop wall time %.1f s, %.2f steps/s (checks and printing included)\n",
               loop_seconds, c.steps / loop_seconds);
  absl::PrintF("  checks (layer-steps): %d passed, %d failed\n", checks_passed, checks_failed);
  if (checks_failed > 0) failures.push_back(absl::StrCat(checks_failed, " checks failed"));
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
  if (!failures.empty()) return absl::InternalError(absl::StrJoin(failures, "; "));
  return absl::OkStatus();
}

// Without a GPU: the CPU reference over one small step, through the accessors the GPU check
// uses, so that the data and the math can be looked at anywhere.
int RunWithoutGpu(const Config& c, const absl::Status& why) {
  absl::PrintF("decode_demo: no usable GPU: %s\n", why.ToString());
  if (mla_testing::GpuRequired()) {
    absl::FPrintF(stderr, "decode_demo: %s is set, so a GPU is required: failing\n",
                  mla_testing::kRequireGpuVariable);
    return 1;
  }
  constexpr int kHeads = 4, kRows = 3, kLayers = 2, kHead = 1, kColumns = 4;
  std::vector<int32_t> lengths = DrawLengths(c.seed, 0, kRows);
  lengths[1] = 0;  // a finished request, whose row is +0.0
  absl::PrintF(
      "CPU reference, one step: heads %d, rows %d, q 1, layers %d; head %d, columns 0..%d\n",
      kHeads, kRows, kLayers, kHead, kColumns - 1);
  for (int layer = 0; layer < kLayers; ++layer) {
    const mla_testing::ReferenceInputs in = StepInputs(kHeads, 1, c.seed, 0, layer, lengths);
    for (int t = 0; t < kRows; ++t) {
      std::string line = absl::StrFormat("  layer %d row %d (length %4d):", layer, t, lengths[t]);
      for (int d = 0; d < kColumns; ++d) {
        const mla_testing::ReferenceElement e = mla_testing::ReferenceOutput(in, t, kHead, d);
        absl::StrAppendFormat(&line, "  %+9.5f (0x%04x)", mla_testing::Bf16ToFloat(e.out), e.out);
      }
      absl::PrintF("%s\n", line);
    }
  }
  absl::PrintF("GPU part skipped: no usable GPU (set %s=1 to fail instead)\n",
               mla_testing::kRequireGpuVariable);
  return 0;
}

int Main() {
  const absl::StatusOr<Config> config = ParseConfig();
  if (!config.ok()) {
    absl::FPrintF(stderr, "decode_demo: %s\n", config.status().ToString());
    return 1;
  }
  if (absl::Status gpu = mla_testing::GpuUsable(); !gpu.ok()) return RunWithoutGpu(*config, gpu);
  if (absl::Status status = RunDemo(*config); !status.ok()) {
    absl::FPrintF(stderr, "decode_demo: %s\n", status.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace mla_graph

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return mla_graph::Main();
}

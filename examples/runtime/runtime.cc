// A small serving runtime's decode step with mla_tail inside it.
//
// The model: `--layers` layers of `--heads` heads, batch buckets `--buckets`, q = 1. Per
// layer the step runs the runtime's attention kernel (a stand-in that writes the layer's latent
// and then runs on for --attention_us), the tail added with mla_tail::AddTailNode behind a
// programmatic (PDL) edge from the attention node, and the runtime's output projection (a
// stand-in that reads the tail's output). The whole step, every layer, is one cudaGraph_t per
// bucket, instantiated once. Each step the runtime rewrites the lengths (inactive requests and
// padding rows get 0), moves every layer to the next of its buffer sets (latent, W_UV, gate,
// output, lengths) with kernel-node updates in the instantiated graph (TailNode::Update for the
// tail), and launches the graph once.
//
// Tensor parallelism (`--devices`, a list of N CUDA devices): each heads count H is the model's,
// split evenly; the k-th device of the list serves the model's heads [k*H/N, (k+1)*H/N), with
// the model's data for those heads, as one rank per GPU would: a host thread of its own that
// makes its device current before anything else, its own stream, buffers, step graphs, MlaTail
// and TailNodes. The devices run at once; nothing crosses from one device to another.
//
//   runtime [--check]   steps with changing lengths and pointers, checked against the CPU
//                       reference; prints PASS or FAIL (exit status 0 or 1); with several
//                       devices each checks its slice against the model's heads it serves
//   runtime --measure   per heads and bucket: the step's GPU time with the tail behind a PDL
//                       edge, behind a full edge, and without the tail; the tail's added time
//                       per layer; the host time of one layer's TailNode::Update, over two
//                       buffer sets (cached by the node) and over all of them (--csv=PATH);
//                       with several devices, each device's, timed while the others run theirs
//
// Without a usable GPU, MlaTail::Create's FailedPrecondition is printed as SKIP and the program
// exits 0, unless MLA_TAIL_REQUIRE_GPU=1 (or MLA_TAIL_REQUIRE_GPUS=N, N >= the devices asked
// for). With fewer usable GPUs than --devices names, it prints SKIP and exits 0, unless
// MLA_TAIL_REQUIRE_GPUS=N with N >= that many devices. A device that does not exist where
// enough are visible, and other errors, exit 2.

#include <cuda_runtime_api.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"
#include "reference.h"
#include "stand_ins.h"

ABSL_FLAG(bool, check, false, "run steps and check them against the CPU reference (the default)");
ABSL_FLAG(bool, measure, false, "time the step graph with and without the tail");
ABSL_FLAG(std::vector<std::string>, heads, {"12"},
          "the model's heads, a list: e.g. 12,64; split evenly over --devices");
ABSL_FLAG(int, layers, 61, "layers of the model");
ABSL_FLAG(std::vector<std::string>, buckets, std::vector<std::string>({"1", "16", "64"}),
          "batch buckets (rows), increasing");
ABSL_FLAG(int, steps, 6, "--check: steps per bucket and edge kind");
ABSL_FLAG(std::vector<std::string>, devices, {},
          "CUDA devices, a list (default 0): with N, the k-th serves heads [k*H/N, (k+1)*H/N) of "
          "each --heads value H, from a host thread of its own");
ABSL_FLAG(int, device, -1, "one CUDA device N: the same as --devices=N (-1: not given)");
ABSL_FLAG(double, attention_us, 5.0,
          "how long the attention stand-in runs on after triggering its dependents");
ABSL_FLAG(int, measure_steps, 20, "--measure: step launches per timing");
ABSL_FLAG(int, repeats, 7, "--measure: timings per graph (the median is reported)");
ABSL_FLAG(int, update_calls, 20000, "--measure: TailNode::Update calls timed per bucket");
ABSL_FLAG(std::string, csv, "", "--measure: also write the results to this CSV file");

namespace example {
namespace {

constexpr int kLatentDim = mla_tail::kLatentDim;
constexpr int kValueDim = mla_tail::kValueDim;
// The buffer sets a step rotates through cover at least this many bytes, so that a layer's
// buffers have left the L2 cache (50 MB on an H200) by the time a step uses them again.
constexpr int64_t kColdBytes = int64_t{192} << 20;

absl::Status Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

// Owners of the CUDA objects a function creates: released on every return path.
struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct EventDestroy {
  void operator()(cudaEvent_t event) const { cudaEventDestroy(event); }
};
struct StreamDestroy {
  void operator()(cudaStream_t stream) const { cudaStreamDestroy(stream); }
};
using DeviceMemory = std::unique_ptr<void, CudaFree>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy>;
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;

absl::Status Allocate(size_t bytes, DeviceMemory* memory, const char* what) {
  void* p = nullptr;
  MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaMalloc(&p, bytes), what));
  memory->reset(p);
  return absl::OkStatus();
}

absl::Status CreateEvent(Event* event) {
  cudaEvent_t e = nullptr;
  MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaEventCreate(&e), "cudaEventCreate"));
  event->reset(e);
  return absl::OkStatus();
}

// The device memory of a model for one heads count, or of the slice of its heads that one device
// serves (the model's heads first_head .. first_head + heads - 1, filled with the model's data for
// them): `sets` buffer sets, each with every layer's latent, W_UV, gate and output and a lengths
// buffer, all sized for the largest bucket.
class Model {
 public:
  struct Layer {
    bf16* latent = nullptr;
    bf16* w_uv = nullptr;
    bf16* gate = nullptr;
    bf16* output = nullptr;
  };

  static absl::StatusOr<std::unique_ptr<Model>> Create(int heads, int first_head, int layers,
                                                       int max_rows, int min_rows,
                                                       cudaStream_t stream) {
    auto model = std::unique_ptr<Model>(new Model(heads, first_head, layers, max_rows));
    // Bytes a step at the smallest bucket touches: every layer's W_UV and its rows.
    const int64_t touched =
        int64_t{layers} *
        (model->w_uv_elements() + int64_t{min_rows} * heads * (kLatentDim + 2 * kValueDim)) * 2;
    model->sets_ = std::max<int>(2, static_cast<int>((kColdBytes + touched - 1) / touched));
    const int64_t per_layer = Aligned(model->latent_elements() * 2) +
                              Aligned(model->w_uv_elements() * 2) +
                              2 * Aligned(model->io_elements() * 2);
    const int64_t per_set = per_layer * layers + Aligned(int64_t{max_rows} * 4);
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaMalloc(&model->memory_, per_set * model->sets_), "cudaMalloc(model)"));
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaMemsetAsync(model->memory_, 0, per_set * model->sets_, stream), "memset"));
    char* p = static_cast<char*>(model->memory_);
    auto take = [&p](int64_t bytes) {
      char* q = p;
      p += Aligned(bytes);
      return q;
    };
    model->layers_.resize(model->sets_);
    for (int set = 0; set < model->sets_; ++set) {
      for (int layer = 0; layer < layers; ++layer) {
        Layer l;
        l.latent = reinterpret_cast<bf16*>(take(model->latent_elements() * 2));
        l.w_uv = reinterpret_cast<bf16*>(take(model->w_uv_elements() * 2));
        l.gate = reinterpret_cast<bf16*>(take(model->io_elements() * 2));
        l.output = reinterpret_cast<bf16*>(take(model->io_elements() * 2));
        MLA_TAIL_RETURN_IF_ERROR(
            Cuda(FillWeights(l.w_uv, heads, first_head, set, layer, stream), "fill"));
        MLA_TAIL_RETURN_IF_ERROR(Cuda(FillGate(l.gate, max_rows, model->columns(),
                                               first_head * kValueDim, set, layer, stream),
                                      "fill"));
        model->layers_[set].push_back(l);
      }
      model->lengths_.push_back(reinterpret_cast<int32_t*>(take(int64_t{max_rows} * 4)));
    }
    model->bytes_ = p - static_cast<char*>(model->memory_);
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), "fill"));
    return model;
  }

  ~Model() { cudaFree(memory_); }

  // Bytes rounded up to a multiple of 256: every buffer starts 256-byte aligned.
  static int64_t Aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

  // Layer `layer`'s tail buffers in set `set` (rows up to the largest bucket).
  mla_tail::TailBuffers Tail(int set, int layer) const {
    const Layer& l = layers_[set][layer];
    return mla_tail::CompactBuffers({heads_, max_rows_, 1}, l.latent, l.w_uv, l.gate, lengths_[set],
                                    l.output);
  }
  const Layer& layer(int set, int layer) const { return layers_[set][layer]; }
  int32_t* lengths(int set) const { return lengths_[set]; }

  int heads() const { return heads_; }
  int first_head() const { return first_head_; }
  int layers() const { return layer_count_; }
  int sets() const { return sets_; }
  int columns() const { return heads_ * kValueDim; }
  int64_t bytes() const { return bytes_; }  // all sets

 private:
  Model(int heads, int first_head, int layers, int max_rows)
      : heads_(heads), first_head_(first_head), layer_count_(layers), max_rows_(max_rows) {}
  int64_t latent_elements() const { return int64_t{max_rows_} * heads_ * kLatentDim; }
  int64_t w_uv_elements() const { return int64_t{heads_} * kValueDim * kLatentDim; }
  int64_t io_elements() const { return int64_t{max_rows_} * columns(); }

  int heads_;
  int first_head_;
  int layer_count_;
  int max_rows_;
  int sets_ = 2;
  void* memory_ = nullptr;
  int64_t bytes_ = 0;
  std::vector<std::vector<Layer>> layers_;  // [set][layer]
  std::vector<int32_t*> lengths_;           // [set]
};

enum class TailEdge { kProgrammatic, kFull, kNoTail };

const char* EdgeName(TailEdge edge) {
  switch (edge) {
    case TailEdge::kProgrammatic:
      return "tail, PDL edge";
    case TailEdge::kFull:
      return "tail, full edge";
    case TailEdge::kNoTail:
      return "no tail";
  }
  return "?";
}

// The runtime's decode step for one bucket: one graph, one executable graph.
class StepGraph {
 public:
  static absl::StatusOr<std::unique_ptr<StepGraph>> Build(const mla_tail::MlaTail& tail,
                                                          const Model& model, int rows,
                                                          TailEdge edge, long long spin_cycles,
                                                          float* checksums) {
    auto step = std::unique_ptr<StepGraph>(new StepGraph(model, rows, edge));
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaGraphCreate(&step->graph_, 0), "cudaGraphCreate"));
    const int layers = model.layers();
    step->attention_args_.resize(layers);
    step->projection_args_.resize(layers);
    step->attention_.resize(layers);
    step->projection_.resize(layers);
    for (int layer = 0; layer < layers; ++layer) {
      const Model::Layer& buffers = model.layer(0, layer);
      AttentionArgs& a = step->attention_args_[layer];
      a.latent = buffers.latent;
      a.row_stride = int64_t{model.heads()} * kLatentDim;
      a.rows = rows;
      a.heads = model.heads();
      a.first_head = model.first_head();
      a.step = 0;
      a.layer = layer;
      a.spin_cycles = spin_cycles;
      cudaKernelNodeParams p = step->AttentionParams(layer);
      const cudaGraphNode_t* after = layer > 0 ? &step->projection_[layer - 1] : nullptr;
      MLA_TAIL_RETURN_IF_ERROR(Cuda(
          cudaGraphAddKernelNode(&step->attention_[layer], step->graph_, after, after ? 1 : 0, &p),
          "cudaGraphAddKernelNode(attention)"));
      cudaGraphNode_t tail_end = step->attention_[layer];
      if (edge != TailEdge::kNoTail) {
        mla_tail::TailNodeOptions options;
        options.programmatic_edge = edge == TailEdge::kProgrammatic;
        absl::StatusOr<mla_tail::TailNode> nodes =
            mla_tail::AddTailNode(tail, step->graph_, {step->attention_[layer]},
                                  {model.heads(), rows, 1}, model.Tail(0, layer), options);
        if (!nodes.ok()) return nodes.status();
        tail_end = nodes->node();
        step->tails_.push_back(*nodes);
      }
      ProjectionArgs& o = step->projection_args_[layer];
      o.output = buffers.output;
      o.row_stride = model.columns();
      o.rows = rows;
      o.columns = model.columns();
      o.checksum = checksums + layer;
      p = step->ProjectionParams(layer);
      MLA_TAIL_RETURN_IF_ERROR(
          Cuda(cudaGraphAddKernelNode(&step->projection_[layer], step->graph_, &tail_end, 1, &p),
               "cudaGraphAddKernelNode(projection)"));
    }
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaGraphInstantiate(&step->exec_, step->graph_, 0), "cudaGraphInstantiate"));
    return step;
  }

  ~StepGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }

  // Points every layer of the executable graph at buffer set `set` and the attention stand-in at
  // step `step`: kernel-node updates, no re-instantiation.
  absl::Status Apply(int step, int set) {
    for (int layer = 0; layer < model_.layers(); ++layer) {
      const Model::Layer& buffers = model_.layer(set, layer);
      attention_args_[layer].latent = buffers.latent;
      attention_args_[layer].step = step;
      cudaKernelNodeParams p = AttentionParams(layer);
      MLA_TAIL_RETURN_IF_ERROR(
          Cuda(cudaGraphExecKernelNodeSetParams(exec_, attention_[layer], &p), "attention"));
      if (!tails_.empty()) {
        MLA_TAIL_RETURN_IF_ERROR(tails_[layer].Update(exec_, model_.Tail(set, layer)));
      }
      projection_args_[layer].output = buffers.output;
      p = ProjectionParams(layer);
      MLA_TAIL_RETURN_IF_ERROR(
          Cuda(cudaGraphExecKernelNodeSetParams(exec_, projection_[layer], &p), "projection"));
    }
    return absl::OkStatus();
  }

  absl::Status Launch(cudaStream_t stream) {
    return Cuda(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch");
  }

  std::vector<mla_tail::TailNode>& tails() { return tails_; }
  cudaGraphExec_t exec() const { return exec_; }
  int rows() const { return rows_; }
  TailEdge edge() const { return edge_; }

 private:
  StepGraph(const Model& model, int rows, TailEdge edge)
      : model_(model), rows_(rows), edge_(edge) {}

  cudaKernelNodeParams AttentionParams(int layer) {
    argument_ = &attention_args_[layer];
    cudaKernelNodeParams p = {};
    p.func = const_cast<void*>(AttentionKernel());
    p.gridDim = dim3(rows_);
    p.blockDim = dim3(kAttentionThreads);
    p.kernelParams = &argument_;
    return p;
  }

  cudaKernelNodeParams ProjectionParams(int layer) {
    argument_ = &projection_args_[layer];
    cudaKernelNodeParams p = {};
    p.func = const_cast<void*>(ProjectionKernel());
    p.gridDim = dim3(1);
    p.blockDim = dim3(kProjectionThreads);
    p.kernelParams = &argument_;
    return p;
  }

  const Model& model_;
  int rows_;
  TailEdge edge_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<cudaGraphNode_t> attention_;
  std::vector<cudaGraphNode_t> projection_;
  std::vector<mla_tail::TailNode> tails_;
  std::vector<AttentionArgs> attention_args_;
  std::vector<ProjectionArgs> projection_args_;
  void* argument_ = nullptr;  // the one kernel argument of the node being written
};

struct Options {
  std::vector<int> heads;  // the model's
  std::vector<int> buckets;
  std::vector<int> devices;  // CUDA devices; the k-th serves the k-th of as many slices of heads
  int layers = 61;
  int steps = 6;
  double attention_us = 5;
  int measure_steps = 20;
  int repeats = 7;
  int update_calls = 20000;
  std::string csv;
};

// A list flag's integers, each at least `min`.
absl::StatusOr<std::vector<int>> ParseList(const std::vector<std::string>& items, const char* flag,
                                           int min = 1) {
  std::vector<int> values;
  for (const std::string& item : items) {
    int value = 0;
    if (!absl::SimpleAtoi(item, &value) || value < min) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": bad entry '", item, "'"));
    }
    values.push_back(value);
  }
  if (values.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return values;
}

// One device's part of the model, as one rank of a tensor-parallel runtime holds it: its CUDA
// device, its MlaTail (of that device) and its place among the devices, which fixes the heads it
// serves of every heads count.
struct Shard {
  int index = 0;   // in --devices
  int count = 1;   // devices
  int device = 0;  // CUDA device
  const mla_tail::MlaTail* tail = nullptr;

  int Heads(int model_heads) const { return model_heads / count; }
  int FirstHead(int model_heads) const { return index * Heads(model_heads); }
  // Names the heads in printed lines: "heads  12" with one device, as always; with several,
  // "device 1 heads [12, 24) of  24".
  std::string Label(int model_heads) const {
    if (count == 1) return absl::StrFormat("heads %3d", model_heads);
    return absl::StrFormat("device %d heads [%d, %d) of %3d", device, FirstHead(model_heads),
                           FirstHead(model_heads) + Heads(model_heads), model_heads);
  }
};

// Whole lines to stdout from any device's thread, each written at once.
void Print(const std::string& text) {
  static std::mutex* const mutex = new std::mutex;
  std::lock_guard<std::mutex> lock(*mutex);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// The devices' threads meet here, so that they time their steps at the same time. A thread that
// ends (done, or on an error) leaves: the others no longer wait for it.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}

  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t generation = generation_;
    if (++waiting_ >= count_) {
      Release();
      return;
    }
    released_.wait(lock, [&] { return generation_ != generation; });
  }

  void Leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    --count_;
    if (waiting_ > 0 && waiting_ >= count_) Release();
  }

 private:
  void Release() {  // mutex_ held
    waiting_ = 0;
    ++generation_;
    released_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable released_;
  int count_;
  int waiting_ = 0;
  int64_t generation_ = 0;
};

// Runs `work(shard, stream, barrier)` for every shard at once, each on a thread of its own that
// makes the shard's device current before anything else and owns a stream of that device; joins
// them all and returns each one's status (in --devices order). Everything `work` makes on a
// device it frees before it returns, on its thread.
template <typename Work>
std::vector<absl::Status> OnEachDevice(const std::vector<Shard>& shards, Work work) {
  std::vector<absl::Status> results(shards.size());
  Barrier barrier(static_cast<int>(shards.size()));
  std::vector<std::thread> threads;
  threads.reserve(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = [&]() -> absl::Status {
        MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaSetDevice(shards[i].device), "cudaSetDevice"));
        cudaStream_t created = nullptr;
        MLA_TAIL_RETURN_IF_ERROR(
            Cuda(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreate"));
        const Stream stream(created);
        return work(shards[i], stream.get(), barrier);
      }();
      barrier.Leave();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

// Everything one heads count needs on one device: the memory of the device's slice of the model,
// the checksums, the spin length.
struct Setup {
  std::unique_ptr<Model> model;
  std::unique_ptr<float, CudaFree> checksums;  // [layers], written by the output projection
  long long spin_cycles = 0;
};

absl::StatusOr<Setup> MakeSetup(const Options& options, const Shard& shard, int model_heads,
                                cudaStream_t stream) {
  Setup setup;
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Create(shard.Heads(model_heads), shard.FirstHead(model_heads), options.layers,
                    options.buckets.back(), options.buckets.front(), stream);
  if (!model.ok()) return model.status();
  setup.model = std::move(*model);
  void* checksums = nullptr;
  MLA_TAIL_RETURN_IF_ERROR(
      Cuda(cudaMalloc(&checksums, options.layers * sizeof(float)), "cudaMalloc(checksums)"));
  setup.checksums.reset(static_cast<float*>(checksums));
  int clock_khz = 0;
  MLA_TAIL_RETURN_IF_ERROR(
      Cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, shard.device), "clock"));
  setup.spin_cycles = static_cast<long long>(options.attention_us * clock_khz / 1000.0);
  return setup;
}

// The lengths of step `step` in a bucket of `rows`: the batch holds rows - step % 3 requests
// (at least one), every fourth of them inactive; the padding rows after the batch get 0.
std::vector<int32_t> StepLengths(int step, int rows, int max_rows) {
  std::vector<int32_t> lengths(max_rows, 0);
  const int batch = std::max(1, rows - step % 3);
  for (int r = 0; r < batch; ++r) {
    lengths[r] = (r + step) % 4 == 1 ? 0 : 1 + (r * 7 + step) % 100;
  }
  return lengths;
}

// --check on one device: steps on the PDL-edge and the full-edge step graph of every heads count
// and bucket, the device's slice checked against the model's heads it serves. Every device makes
// the same steps (the same step numbers, lengths and buffer sets): together, one model's.
absl::StatusOr<bool> Check(const Options& options, const Shard& shard, cudaStream_t stream) {
  const mla_tail::MlaTail& tail = *shard.tail;
  bool all_ok = true;
  int step = 0;  // the formulas' step: distinct for every launch
  for (int model_heads : options.heads) {
    absl::StatusOr<Setup> setup = MakeSetup(options, shard, model_heads, stream);
    if (!setup.ok()) return setup.status();
    const Model& model = *setup->model;
    const int max_rows = options.buckets.back();
    const std::vector<int> checked_layers = {0, options.layers / 2, options.layers - 1};
    for (int rows : options.buckets) {
      for (TailEdge edge : {TailEdge::kProgrammatic, TailEdge::kFull}) {
        absl::StatusOr<std::unique_ptr<StepGraph>> graph =
            StepGraph::Build(tail, model, rows, edge, setup->spin_cycles, setup->checksums.get());
        if (!graph.ok()) return graph.status();
        int64_t bad = 0;
        std::string first;
        for (int s = 0; s < options.steps; ++s, ++step) {
          const int set = step % model.sets();
          const std::vector<int32_t> lengths = StepLengths(step, rows, max_rows);
          // From pageable memory the copy has taken `lengths` when the call returns (and the
          // stream is synchronised below). A loop copying from pinned memory, truly async, must
          // not rewrite that host buffer before the copy completes (an event after it).
          MLA_TAIL_RETURN_IF_ERROR(
              Cuda(cudaMemcpyAsync(model.lengths(set), lengths.data(), lengths.size() * 4,
                                   cudaMemcpyHostToDevice, stream),
                   "lengths"));
          for (int layer : checked_layers) {  // stale output would not pass
            MLA_TAIL_RETURN_IF_ERROR(
                Cuda(cudaMemsetAsync(model.layer(set, layer).output, 0xff,
                                     static_cast<size_t>(rows) * model.columns() * 2, stream),
                     "memset"));
          }
          MLA_TAIL_RETURN_IF_ERROR((*graph)->Apply(step, set));
          MLA_TAIL_RETURN_IF_ERROR((*graph)->Launch(stream));
          MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream), "step"));
          std::vector<float> checksums(options.layers);
          MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaMemcpy(checksums.data(), setup->checksums.get(),
                                                   checksums.size() * 4, cudaMemcpyDeviceToHost),
                                        "checksums"));
          for (int layer : checked_layers) {
            std::vector<uint16_t> out(static_cast<size_t>(rows) * model.columns());
            MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaMemcpy(out.data(), model.layer(set, layer).output,
                                                     out.size() * 2, cudaMemcpyDeviceToHost),
                                          "output"));
            LayerCase c;
            c.heads = model.heads();
            c.first_head = model.first_head();
            c.rows = rows;
            c.step = step;
            c.set = set;
            c.layer = layer;
            c.lengths = lengths.data();
            std::string why;
            const int64_t mismatches = CheckLayer(c, out.data(), &why);
            if (mismatches > 0 && first.empty()) first = why;
            bad += mismatches;
            const float want =
                ProjectionChecksum(out.data(), model.columns(), rows, model.columns());
            if (!(checksums[layer] == want)) {
              ++bad;
              if (first.empty()) {
                first = absl::StrFormat(
                    "layer %d step %d: output projection's checksum %g, "
                    "its input sums to %g",
                    layer, step, checksums[layer], want);
              }
            }
          }
        }
        Print(absl::StrFormat("check %s rows %3d %-16s %d steps x layers {%d,%d,%d}: %s%s\n",
                              shard.Label(model_heads), rows, EdgeName(edge), options.steps,
                              checked_layers[0], checked_layers[1], checked_layers[2],
                              bad == 0 ? "ok" : absl::StrCat(bad, " mismatches; first: "), first));
        all_ok = all_ok && bad == 0;
      }
    }
  }
  return all_ok;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Device-to-device copy rate, bytes read plus bytes written per second.
absl::StatusOr<double> CopyRate(cudaStream_t stream) {
  const size_t bytes = size_t{512} << 20;
  DeviceMemory a, b;
  MLA_TAIL_RETURN_IF_ERROR(Allocate(bytes, &a, "cudaMalloc(copy)"));
  MLA_TAIL_RETURN_IF_ERROR(Allocate(bytes, &b, "cudaMalloc(copy)"));
  Event start, stop;
  MLA_TAIL_RETURN_IF_ERROR(CreateEvent(&start));
  MLA_TAIL_RETURN_IF_ERROR(CreateEvent(&stop));
  double best = 0;
  for (int i = 0; i < 6; ++i) {
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaEventRecord(start.get(), stream), "cudaEventRecord"));
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream), "copy"));
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaEventRecord(stop.get(), stream), "cudaEventRecord"));
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(stop.get()), "copy"));
    float ms = 0;
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime"));
    if (!(ms > 0)) {  // a rate from it would be infinite
      return absl::InternalError(absl::StrCat("copy rate: a copy timed at ", ms, " ms"));
    }
    if (i > 0) best = std::max(best, 2.0 * bytes / (ms * 1e-3));
  }
  return best;
}

// GPU time of one step launch, the median of `repeats` timings of `launches` launches. The
// stream is held while the host applies each step's pointers and enqueues the launches, so that
// host time never shows in the GPU time; every launch moves to the next buffer set.
class StepTimer {
 public:
  static absl::StatusOr<std::unique_ptr<StepTimer>> Create() {
    auto timer = std::unique_ptr<StepTimer>(new StepTimer);
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaHostAlloc(reinterpret_cast<void**>(&timer->flags_),
                                                2 * sizeof(int), cudaHostAllocMapped),
                                  "cudaHostAlloc"));
    MLA_TAIL_RETURN_IF_ERROR(Cuda(
        cudaHostGetDevicePointer(reinterpret_cast<void**>(&timer->device_flags_), timer->flags_, 0),
        "cudaHostGetDevicePointer"));
    MLA_TAIL_RETURN_IF_ERROR(CreateEvent(&timer->start_));
    MLA_TAIL_RETURN_IF_ERROR(CreateEvent(&timer->stop_));
    return timer;
  }
  ~StepTimer() {
    if (flags_ != nullptr) cudaFreeHost(flags_);
  }

  // Microseconds per launch.
  absl::StatusOr<double> Time(StepGraph& graph, int sets, int launches, int* step,
                              cudaStream_t stream) {
    volatile int* flags = flags_;
    flags[0] = 0;  // release
    flags[1] = 0;  // timed out
    // The host enqueues a step in a few hundred microseconds; if the launch queue fills before
    // all are in, the hold ends after 100 ms and the GPU starts early (counted, reported).
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(HoldStream(device_flags_, device_flags_ + 1, 100000000LL, stream), "hold"));
    absl::Status enqueued = Cuda(cudaEventRecord(start_.get(), stream), "event");
    for (int i = 0; i < launches && enqueued.ok(); ++i, ++*step) {
      enqueued = graph.Apply(*step, *step % sets);
      if (enqueued.ok()) enqueued = graph.Launch(stream);
    }
    if (enqueued.ok()) enqueued = Cuda(cudaEventRecord(stop_.get(), stream), "event");
    flags[0] = 1;  // on every path: the held stream must not wait out its timeout
    MLA_TAIL_RETURN_IF_ERROR(enqueued);
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaEventSynchronize(stop_.get()), "timed steps"));
    if (flags[1] != 0) ++holds_timed_out_;
    float ms = 0;
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaEventElapsedTime(&ms, start_.get(), stop_.get()), "elapsed"));
    return ms * 1000.0 / launches;
  }

  // Timings whose hold ended before the host had enqueued every launch.
  int holds_timed_out() const { return holds_timed_out_; }

 private:
  StepTimer() = default;
  int* flags_ = nullptr;
  int* device_flags_ = nullptr;
  Event start_;
  Event stop_;
  int holds_timed_out_ = 0;
};

// Mean host time of one TailNode::Update, each layer cycling through the first `sets` buffer
// sets. A node keeps its last two checked sets and does not validate or check them again: over
// two sets (the figure quoted as "with the buffers cached") every update hits that cache; over
// the model's sets, as Apply cycles through them each step, 3 or more sets miss it every time.
absl::StatusOr<double> UpdateMicroseconds(StepGraph& graph, const Model& model, int sets,
                                          int calls) {
  std::vector<mla_tail::TailNode>& tails = graph.tails();
  const int layers = model.layers();
  // Warm with the cycle's last two sets: with two, every timed update hits the cache; with more,
  // every one misses it, the first included.
  for (int set = std::max(0, sets - 2); set < sets; ++set) {
    for (int i = 0; i < layers; ++i) {
      MLA_TAIL_RETURN_IF_ERROR(tails[i].Update(graph.exec(), model.Tail(set, i)));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    const int layer = i % layers;
    MLA_TAIL_RETURN_IF_ERROR(
        tails[layer].Update(graph.exec(), model.Tail((i / layers) % sets, layer)));
  }
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(stop - start).count() / calls;
}

// Mean host time of CUDA's own part of that update: cudaGraphExecKernelNodeSetParams of each
// layer's node with the parameters the node holds in the graph (TailNode::Update adds its
// validation, pointer checks, device guard and error-state scope to this). Those parameters are
// the buffers the node was added with, not those TailNode::buffers() reports for the exec, so
// each node is pointed back at its buffers() afterwards: the handles describe the exec again.
absl::StatusOr<double> SetParamsMicroseconds(StepGraph& graph, int layers, int calls) {
  std::vector<mla_tail::TailNode>& tails = graph.tails();
  std::vector<cudaKernelNodeParams> params(layers);
  for (int i = 0; i < layers; ++i) {
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaGraphKernelNodeGetParams(tails[i].node(), &params[i]), "get params"));
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    const int layer = i % layers;
    MLA_TAIL_RETURN_IF_ERROR(
        Cuda(cudaGraphExecKernelNodeSetParams(graph.exec(), tails[layer].node(), &params[layer]),
             "cudaGraphExecKernelNodeSetParams"));
  }
  const auto stop = std::chrono::steady_clock::now();
  for (int i = 0; i < layers; ++i) {
    const mla_tail::TailBuffers buffers = tails[i].buffers();
    MLA_TAIL_RETURN_IF_ERROR(tails[i].Update(graph.exec(), buffers));
  }
  return std::chrono::duration<double, std::micro>(stop - start).count() / calls;
}

// What --measure found on one device.
struct Measured {
  std::string csv;  // rows, without the header
  bool all_ok = true;
  int holds_timed_out = 0;
};

// --measure on one device. With several devices, each times its own step graphs while the others
// time theirs (the threads meet before each timing), and prints its rows as they come, each
// naming its device and the model's heads.
absl::Status Measure(const Options& options, const Shard& shard, cudaStream_t stream,
                     Barrier& barrier, Measured* measured) {
  const mla_tail::MlaTail& tail = *shard.tail;
  const bool several = shard.count > 1;
  absl::StatusOr<double> copy_rate = CopyRate(stream);
  if (!copy_rate.ok()) return copy_rate.status();
  absl::StatusOr<std::unique_ptr<StepTimer>> timer = StepTimer::Create();
  if (!timer.ok()) return timer.status();
  Print(absl::StrFormat("%sdevice-to-device copy rate (read + write): %.0f GB/s\n",
                        several ? absl::StrFormat("device %d: ", shard.device) : "",
                        *copy_rate / 1e9));
  barrier.Wait();  // every device's copy rate printed
  if (shard.index == 0) {
    // With several devices: the CUDA device and the model's heads, then the device's own heads.
    const std::string device_columns[2] = {
        several ? absl::StrFormat("%3s %5s ", "dev", "model") : "",
        several ? absl::StrFormat("%3s %5s ", "", "heads") : ""};
    Print(absl::StrFormat(
        "%d layers, attention stand-in runs on %.1f us after its trigger; step times are "
        "medians of %d timings of %d launches\n",
        options.layers, options.attention_us, options.repeats, options.measure_steps));
    Print(absl::StrFormat("%s%5s %4s %-12s %4s %10s %10s %10s | %10s %10s %10s %5s | %9s %9s %9s\n",
                          device_columns[0], "heads", "rows", "kernel", "sets", "step PDL",
                          "step full", "step none", "tail PDL", "tail full", "budget", "ok",
                          "update", "cuda", "all sets"));
    Print(absl::StrFormat("%s%5s %4s %-12s %4s %10s %10s %10s | %10s %10s %10s %5s | %9s %9s %9s\n",
                          device_columns[1], "", "", "", "", "us", "us", "us", "us/layer",
                          "us/layer", "us/layer", "", "us/layer", "us/layer", "us/layer"));
  }
  barrier.Wait();  // the header printed
  int step = 0;
  for (int model_heads : options.heads) {
    absl::StatusOr<Setup> setup = MakeSetup(options, shard, model_heads, stream);
    if (!setup.ok()) return setup.status();
    const Model& model = *setup->model;
    const int heads = model.heads();
    for (int rows : options.buckets) {
      // Every request active in every set.
      std::vector<int32_t> lengths(options.buckets.back(), 0);
      for (int r = 0; r < rows; ++r) lengths[r] = 1 + r % 100;
      for (int set = 0; set < model.sets(); ++set) {
        MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaMemcpy(model.lengths(set), lengths.data(),
                                                 lengths.size() * 4, cudaMemcpyHostToDevice),
                                      "lengths"));
      }
      // Landed before the non-blocking stream's graphs read them.
      MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "lengths"));
      std::vector<std::unique_ptr<StepGraph>> graphs;
      for (TailEdge edge : {TailEdge::kProgrammatic, TailEdge::kFull, TailEdge::kNoTail}) {
        absl::StatusOr<std::unique_ptr<StepGraph>> graph =
            StepGraph::Build(tail, model, rows, edge, setup->spin_cycles, setup->checksums.get());
        if (!graph.ok()) return graph.status();
        graphs.push_back(std::move(*graph));
      }
      std::vector<std::vector<double>> times(graphs.size());
      for (int repeat = -1; repeat < options.repeats; ++repeat) {  // -1: warm-up
        for (size_t g = 0; g < graphs.size(); ++g) {
          barrier.Wait();  // every device times the same graph at once
          absl::StatusOr<double> us =
              (*timer)->Time(*graphs[g], model.sets(), options.measure_steps, &step, stream);
          if (!us.ok()) return us.status();
          if (repeat >= 0) times[g].push_back(*us);
        }
      }
      const double pdl = Median(times[0]);
      const double full = Median(times[1]);
      const double none = Median(times[2]);
      const double added_pdl = (pdl - none) / options.layers;
      const double added_full = (full - none) / options.layers;
      const int64_t activation_bytes =
          int64_t{rows} * heads * (kLatentDim + 2 * kValueDim) * 2 + int64_t{rows} * 4;
      const double budget = 1.0 + activation_bytes / *copy_rate * 1e6;
      barrier.Wait();  // the host times too: every device's thread updates at once
      absl::StatusOr<double> update =
          UpdateMicroseconds(*graphs[0], model, /*sets=*/2, options.update_calls);
      if (!update.ok()) return update.status();
      absl::StatusOr<double> set_params =
          SetParamsMicroseconds(*graphs[0], model.layers(), options.update_calls);
      if (!set_params.ok()) return set_params.status();
      absl::StatusOr<double> update_all_sets =
          UpdateMicroseconds(*graphs[0], model, model.sets(), options.update_calls);
      if (!update_all_sets.ok()) return update_all_sets.status();
      const bool within = added_pdl <= budget;
      const bool pdl_faster = added_pdl < added_full;
      const bool ok = within && pdl_faster && *update <= 2.0;
      measured->all_ok = measured->all_ok && ok;
      const char* kernel = mla_tail::FusedKernelName(graphs[0]->tails()[0].kernel());
      Print(absl::StrFormat(
          "%s%5d %4d %-12s %4d %10.1f %10.1f %10.1f | %10.3f %10.3f %10.3f %5s | %9.3f %9.3f "
          "%9.3f\n",
          several ? absl::StrFormat("%3d %5d ", shard.device, model_heads) : "", heads, rows,
          kernel, model.sets(), pdl, full, none, added_pdl, added_full, budget, ok ? "yes" : "NO",
          *update, *set_params, *update_all_sets));
      absl::StrAppendFormat(
          &measured->csv,
          "%d,%d,%d,%s,%d,%d,%.2f,%.3f,%.3f,%.3f,%.4f,%.4f,%d,%.1f,%.4f,%d,%d,%.4f,%.4f,%.4f%s\n",
          heads, rows, options.layers, kernel, model.sets(), model.bytes(), options.attention_us,
          pdl, full, none, added_pdl, added_full, activation_bytes, *copy_rate / 1e9, budget,
          within ? 1 : 0, pdl_faster ? 1 : 0, *update, *set_params, *update_all_sets,
          several ? absl::StrCat(",", shard.device) : "");
    }
  }
  measured->holds_timed_out = (*timer)->holds_timed_out();
  return absl::OkStatus();
}

// MLA_TAIL_REQUIRE_GPU=1: a run without a usable GPU fails instead of skipping.
bool GpuRequired() {
  const char* require = std::getenv("MLA_TAIL_REQUIRE_GPU");
  return require != nullptr && std::strcmp(require, "1") == 0;
}

// MLA_TAIL_REQUIRE_GPUS=N (as the GPU tests read it): a run that asks for N or fewer devices
// fails instead of skipping when they are not all usable.
int RequiredGpus() {
  const char* value = std::getenv("MLA_TAIL_REQUIRE_GPUS");
  int n = 0;
  if (value != nullptr && (!absl::SimpleAtoi(value, &n) || n < 0)) {
    std::fprintf(stderr, "MLA_TAIL_REQUIRE_GPUS=%s: not a device count\n", value);
    std::exit(2);
  }
  return n;
}

// The MlaTail of every device of --devices, in its order; exits (0: SKIP, 2: failure) where they
// cannot all be made. Created here, before any device's thread starts, each is then used by its
// device's thread alone and destroyed after every thread has been joined.
absl::StatusOr<std::vector<std::unique_ptr<mla_tail::MlaTail>>> CreateTails(const Options& options,
                                                                            int* exit_code) {
  const int count = static_cast<int>(options.devices.size());
  const std::string devices = absl::StrJoin(options.devices, ",");
  // Fewer usable GPUs than --devices names (none at all is the case below).
  auto too_few = [&](const std::string& why) {
    if (RequiredGpus() >= count) {
      std::fprintf(stderr, "--devices=%s needs %d usable GPUs (MLA_TAIL_REQUIRE_GPUS=%d): %s\n",
                   devices.c_str(), count, RequiredGpus(), why.c_str());
      *exit_code = 2;
    } else {
      std::printf(
          "SKIP (fewer usable GPUs than --devices names): --devices=%s needs %d: %s (set "
          "MLA_TAIL_REQUIRE_GPUS=%d to fail instead)\n",
          devices.c_str(), count, why.c_str(), count);
      *exit_code = 0;
    }
    return absl::FailedPreconditionError(why);
  };
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) {
    visible = 0;
    (void)cudaGetLastError();  // not sticky: MlaTail::Create says why below
  }
  if (visible > 0 && visible < count) {
    return too_few(absl::StrCat(visible, " visible"));
  }
  for (int device : options.devices) {
    if (visible >= count && device >= visible) {  // enough GPUs: a device that does not exist
      std::fprintf(stderr, "--devices=%s names device %d; %d are visible (0-%d)\n", devices.c_str(),
                   device, visible, visible - 1);
      *exit_code = 2;
      return absl::InvalidArgumentError("no such device");
    }
  }
  std::vector<std::unique_ptr<mla_tail::MlaTail>> tails;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
        mla_tail::MlaTail::Create(options.devices[i], mla_tail::TailOptions{});
    if (tail.ok()) {
      tails.push_back(std::move(*tail));
      continue;
    }
    if (tail.status().code() == absl::StatusCode::kFailedPrecondition) {
      if (i > 0) return too_few(tail.status().ToString());
      if (!GpuRequired() && RequiredGpus() < count) {
        std::printf("SKIP (no usable GPU): %s\n", tail.status().ToString().c_str());
        *exit_code = 0;
        return tail.status();
      }
    }
    std::fprintf(stderr, "MlaTail::Create: %s\n", tail.status().ToString().c_str());
    *exit_code = 2;
    return tail.status();
  }
  return tails;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Options options;
  absl::StatusOr<std::vector<int>> heads = ParseList(absl::GetFlag(FLAGS_heads), "heads");
  absl::StatusOr<std::vector<int>> buckets = ParseList(absl::GetFlag(FLAGS_buckets), "buckets");
  if (!heads.ok() || !buckets.ok()) {
    std::fprintf(stderr, "%s\n",
                 (!heads.ok() ? heads.status() : buckets.status()).ToString().c_str());
    return 2;
  }
  options.heads = *heads;
  options.buckets = *buckets;
  if (std::adjacent_find(options.buckets.begin(), options.buckets.end(),
                         std::greater_equal<int>()) != options.buckets.end()) {
    std::fprintf(stderr, "--buckets must increase\n");
    return 2;
  }
  const std::vector<std::string> devices_flag = absl::GetFlag(FLAGS_devices);
  absl::StatusOr<std::vector<int>> devices =
      devices_flag.empty() ? absl::StatusOr<std::vector<int>>(std::vector<int>{0})
                           : ParseList(devices_flag, "devices", /*min=*/0);
  if (!devices.ok()) {
    std::fprintf(stderr, "%s\n", devices.status().ToString().c_str());
    return 2;
  }
  options.devices = *devices;
  // --device=N is --devices=N; with --devices as well it is a mistake.
  if (const int device = absl::GetFlag(FLAGS_device); device != -1) {
    if (device < 0) {
      std::fprintf(stderr, "--device=%d: not a device\n", device);
      return 2;
    }
    if (!devices_flag.empty()) {
      std::fprintf(stderr, "--device and --devices: give one of them\n");
      return 2;
    }
    options.devices = {device};
  }
  if (std::set<int>(options.devices.begin(), options.devices.end()).size() !=
      options.devices.size()) {
    std::fprintf(stderr, "--devices=%s: each device once\n",
                 absl::StrJoin(options.devices, ",").c_str());
    return 2;
  }
  const int device_count = static_cast<int>(options.devices.size());
  for (int h : options.heads) {
    if (h % device_count != 0) {
      std::fprintf(stderr,
                   "--heads: %d heads do not split evenly over %d devices (--devices=%s); give "
                   "heads counts divisible by %d\n",
                   h, device_count, absl::StrJoin(options.devices, ",").c_str(), device_count);
      return 2;
    }
  }
  options.layers = absl::GetFlag(FLAGS_layers);
  options.steps = absl::GetFlag(FLAGS_steps);
  options.attention_us = absl::GetFlag(FLAGS_attention_us);
  options.measure_steps = absl::GetFlag(FLAGS_measure_steps);
  options.repeats = absl::GetFlag(FLAGS_repeats);
  options.update_calls = absl::GetFlag(FLAGS_update_calls);
  options.csv = absl::GetFlag(FLAGS_csv);
  if (options.layers < 1 || options.steps < 1 || options.measure_steps < 1 || options.repeats < 1 ||
      options.update_calls < 1) {
    std::fprintf(stderr,
                 "--layers, --steps, --measure_steps, --repeats and --update_calls must be "
                 "positive\n");
    return 2;
  }
  // The stand-in spins for a cycle count derived from it: finite, and at most a second.
  if (!std::isfinite(options.attention_us) || options.attention_us < 0 ||
      options.attention_us > 1e6) {
    std::fprintf(stderr, "--attention_us=%g: give a time in [0, 1e6] microseconds\n",
                 options.attention_us);
    return 2;
  }
  const bool measure = absl::GetFlag(FLAGS_measure);
  const bool check = absl::GetFlag(FLAGS_check) || !measure;
  const bool several = device_count > 1;
  if (!options.csv.empty() && !measure) {
    std::fprintf(stderr, "--csv=%s needs --measure: there is nothing else to write\n",
                 options.csv.c_str());
    return 2;
  }
  (void)RequiredGpus();  // a bad MLA_TAIL_REQUIRE_GPUS exits here, whatever the run finds

  int exit_code = 0;
  // Outlive every device's thread: destroyed when Main returns, after the last join.
  absl::StatusOr<std::vector<std::unique_ptr<mla_tail::MlaTail>>> tails =
      CreateTails(options, &exit_code);
  if (!tails.ok()) return exit_code;
  std::vector<Shard> shards(device_count);
  for (int i = 0; i < device_count; ++i) {
    shards[i].index = i;
    shards[i].count = device_count;
    shards[i].device = options.devices[i];
    shards[i].tail = (*tails)[i].get();
  }
  // A device's error: "check: ..." with one device, as always; "check: device N: ..." with more.
  auto report_errors = [&](const char* what, const std::vector<absl::Status>& results) {
    bool failed = false;
    for (int i = 0; i < device_count; ++i) {
      if (results[i].ok()) continue;
      failed = true;
      std::fprintf(stderr, "%s: %s%s\n", what,
                   several ? absl::StrCat("device ", shards[i].device, ": ").c_str() : "",
                   results[i].ToString().c_str());
    }
    return failed;
  };
  int status = 0;
  if (check) {
    std::vector<char> passed(device_count, 0);
    const std::vector<absl::Status> results =
        OnEachDevice(shards, [&](const Shard& shard, cudaStream_t stream, Barrier&) {
          absl::StatusOr<bool> ok = Check(options, shard, stream);
          if (!ok.ok()) return ok.status();
          passed[shard.index] = *ok ? 1 : 0;
          return absl::OkStatus();
        });
    if (report_errors("check", results)) return 2;
    bool all_passed = true;
    for (int i = 0; i < device_count; ++i) {
      if (several) std::printf("device %d: %s\n", shards[i].device, passed[i] ? "PASS" : "FAIL");
      all_passed = all_passed && passed[i];
    }
    std::printf("%s\n", all_passed ? "PASS" : "FAIL");
    std::fflush(stdout);
    if (!all_passed) status = 1;
  }
  if (measure) {
    std::vector<Measured> measured(device_count);
    const std::vector<absl::Status> results =
        OnEachDevice(shards, [&](const Shard& shard, cudaStream_t stream, Barrier& barrier) {
          return Measure(options, shard, stream, barrier, &measured[shard.index]);
        });
    if (report_errors("measure", results)) return 2;
    std::printf(
        "budget = 1.0 us + activation bytes (latent, gate, output, lengths) at the copy "
        "rate; ok = within it, faster with the PDL edge than with a full edge, and an "
        "update <= 2 us (TailNode::Update; of it, CUDA's cudaGraphExecKernelNodeSetParams: cuda)\n"
        "update = with the buffers cached: each layer alternates two buffer sets, both among the "
        "node's last two checked sets, which it does not check again; all sets = each layer "
        "cycles through all `sets`, as the steps do, so with 3 or more every update checks its "
        "buffers\n");
    if (several) {
      std::printf(
          "dev = the CUDA device, timed while the others ran theirs; model = the model's heads, "
          "of which the k-th device of --devices=%s serves heads [k*h, (k+1)*h), h = heads\n",
          absl::StrJoin(options.devices, ",").c_str());
    }
    bool all_ok = true;
    for (int i = 0; i < device_count; ++i) {
      if (measured[i].holds_timed_out > 0) {
        std::printf(
            "note: %sin %d timings the launch queue filled before every launch was enqueued; "
            "those timings include host time if the host was slower than the GPU\n",
            several ? absl::StrCat("device ", shards[i].device, ": ").c_str() : "",
            measured[i].holds_timed_out);
      }
      if (several) {
        std::printf("device %d: %s\n", shards[i].device,
                    measured[i].all_ok ? "all within" : "some outside");
      }
      all_ok = all_ok && measured[i].all_ok;
    }
    std::printf("%s\n", all_ok ? "MEASURE: all within" : "MEASURE: some outside");
    if (!options.csv.empty()) {
      // With several devices a last column, device: rows come in --devices order.
      std::string csv = absl::StrCat(
          "heads,rows,layers,kernel,buffer_sets,buffer_bytes,attention_us,step_us_tail_pdl,"
          "step_us_tail_full,step_us_no_tail,tail_us_per_layer_pdl,tail_us_per_layer_full,"
          "activation_bytes,copy_rate_gbps,budget_us_per_layer,within_budget,pdl_faster,"
          "update_us_per_layer,set_params_us_per_layer,update_us_per_layer_all_sets",
          several ? ",device" : "", "\n");
      for (const Measured& m : measured) csv += m.csv;
      // A regular file is written beside it and renamed over it once whole: a failed write leaves
      // the file it replaces, never half of one. Anything else (/dev/stdout, a pipe) is written
      // in place.
      struct stat existing = {};
      const bool in_place = stat(options.csv.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode);
      const std::string partial = in_place ? options.csv : options.csv + ".partial";
      std::FILE* f = std::fopen(partial.c_str(), "w");
      if (f == nullptr) {
        std::fprintf(stderr, "measure: cannot write %s\n", partial.c_str());
        return 2;
      }
      const bool written = std::fputs(csv.c_str(), f) >= 0 && std::fflush(f) == 0;
      if (std::fclose(f) != 0 || !written ||
          (!in_place && std::rename(partial.c_str(), options.csv.c_str()) != 0)) {
        std::fprintf(stderr, "measure: cannot write %s\n", options.csv.c_str());
        if (!in_place) std::remove(partial.c_str());
        return 2;
      }
      std::printf("wrote %s\n", options.csv.c_str());
    }
  }
  return status;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) { return example::Main(argc, argv); }

#include "mla_tail/graph/tail_graph_set.h"

#include <cuda_runtime.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/fault_hooks.h"
#include "mla/internal/tail_access.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla_tail/graph/buckets.h"

namespace mla_tail {

using mla_tail::TailBuffers;
using mla_tail::TailPath;
using mla_tail::TailShape;

// One (layer, bucket) graph: the captured template (brought up to date with the executable graph
// when exported), its executable graph, and the kernel nodes a pointer update rewrites, with the
// arguments they were captured with (their scratch pointers stay; the caller's change).
struct TailGraphSet::Entry {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  TailPath path = TailPath::kFused;
  TailBuffers applied;          // the caller's buffers the executable graph holds now
  bool template_stale = false;  // the template still holds older buffers (updated at export)
  cudaGraphNode_t value_node = nullptr, tables_node = nullptr;
  cudaKernelNodeParams value_launch{}, tables_launch{};
  internal::BmmPointerParams tables_args{};

  bool captured() const { return exec != nullptr; }
  void Destroy() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    *this = Entry();
  }
};

namespace {

bool SameBuffers(const TailBuffers& a, const TailBuffers& b) {
  return a.latent == b.latent && a.latent_row_stride == b.latent_row_stride && a.w_uv == b.w_uv &&
         a.w_head_stride == b.w_head_stride && a.w_row_stride == b.w_row_stride &&
         a.gate == b.gate && a.gate_row_stride == b.gate_row_stride && a.lengths == b.lengths &&
         a.output == b.output && a.output_row_stride == b.output_row_stride;
}

// Rewrites one kernel node's argument: in the executable graph (`exec` set) or in the template.
template <typename Args>
absl::Status SetKernelArgs(cudaGraphExec_t exec, cudaGraphNode_t node,
                           const cudaKernelNodeParams& launch, Args args) {
  cudaKernelNodeParams params = launch;
  void* arguments[] = {&args};
  params.kernelParams = arguments;
  params.extra = nullptr;
  if (exec == nullptr) {
    return internal::CudaStatus(cudaGraphKernelNodeSetParams(node, &params),
                                "cudaGraphKernelNodeSetParams");
  }
  return internal::CudaStatus(cudaGraphExecKernelNodeSetParams(exec, node, &params),
                              "cudaGraphExecKernelNodeSetParams");
}

// Whether a replay could take the BMM path under the set's path: for a bucket, or eagerly up to
// max_eager_rows. Only then does the set's tail hold that path's scratch (64 MiB and more).
bool MayTakeBmmPath(const GraphSetOptions& options) {
  const int max_rows = std::max(options.buckets.back(), options.max_eager_rows);
  for (int rows = options.q; rows <= max_rows; rows += options.q) {
    if (mla_tail::MlaTail::Resolve(options.path, {options.heads, rows, options.q}) ==
        TailPath::kBmm) {
      return true;
    }
  }
  return false;
}

// Why rows beyond the largest bucket are refused, with the eager fallback's limit.
absl::Status EagerOutOfRange(const absl::Status& beyond_buckets, int max_eager_rows) {
  return absl::OutOfRangeError(absl::StrCat(
      beyond_buckets.message(),
      max_eager_rows > 0
          ? absl::StrCat(" and the eager fallback's max_eager_rows = ", max_eager_rows)
          : std::string("; set GraphSetOptions.max_eager_rows for an eager fallback")));
}

}  // namespace

absl::Status ZeroPaddingLengths(int32_t* lengths, int rows, int bucket_rows, int q,
                                cudaStream_t stream) {
  if (lengths == nullptr) return absl::InvalidArgumentError("lengths is null");
  if (q < 1 || rows < 0 || rows % q != 0 || bucket_rows % q != 0 || rows > bucket_rows) {
    return absl::InvalidArgumentError(absl::StrCat("ZeroPaddingLengths: rows = ", rows,
                                                   ", bucket_rows = ", bucket_rows, ", q = ", q,
                                                   " (multiples of q, rows <= bucket_rows)"));
  }
  if (rows == bucket_rows) return absl::OkStatus();
  return internal::CudaStatus(
      cudaMemsetAsync(lengths + rows / q, 0, size_t(bucket_rows - rows) / q * sizeof(int32_t),
                      stream),
      "cudaMemsetAsync(padding lengths)");
}

absl::StatusOr<std::unique_ptr<TailGraphSet>> TailGraphSet::Create(
    int device, const GraphSetOptions& options_in) {
  mla_tail::internal::CudaErrorScope errors;
  GraphSetOptions options = options_in;
  if (options.q < 1 || options.q > mla_tail::kMaxQ) {
    return absl::InvalidArgumentError(
        absl::StrCat("q = ", options.q, " is outside [1, ", mla_tail::kMaxQ, "]"));
  }
  if (options.buckets.empty()) options.buckets = DefaultBuckets(options.q);
  MLA_RETURN_IF_ERROR(ValidateBuckets(options.buckets, options.q));
  MLA_RETURN_IF_ERROR(mla_tail::ValidateShape({options.heads, options.buckets.back(), options.q}));
  if (options.layers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("layers = ", options.layers, " is below 1"));
  }
  if (options.max_eager_rows < 0 || options.max_eager_rows > mla_tail::kMaxRows ||
      options.max_eager_rows % options.q != 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_eager_rows = ", options.max_eager_rows,
                                                   " must be in [0, ", mla_tail::kMaxRows,
                                                   "] and a multiple of q = ", options.q));
  }
  mla_tail::TailOptions tail_options;
  tail_options.bmm = MayTakeBmmPath(options);
  tail_options.max_heads = options.heads;
  tail_options.max_rows = std::max(options.buckets.back(), options.max_eager_rows);
  tail_options.workspace_bytes = options.workspace_bytes;
  tail_options.pdl = options.pdl;
  tail_options.fused_kernel = options.fused_kernel;
  absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
      mla_tail::MlaTail::Create(device, tail_options);
  if (!tail.ok()) return tail.status();

  std::unique_ptr<TailGraphSet> set(new TailGraphSet(device, std::move(options), *std::move(tail)));
  set->stats_.scratch_bytes = static_cast<int64_t>(set->tail_->scratch_bytes());
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device));
  mla_tail::internal::RelaxedCaptureMode relaxed;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&set->capture_stream_, cudaStreamNonBlocking),
                           "cudaStreamCreate(capture stream)");
  return set;
}

TailGraphSet::TailGraphSet(int device, GraphSetOptions options,
                           std::unique_ptr<mla_tail::MlaTail> tail)
    : device_(device),
      options_(std::move(options)),
      tail_(std::move(tail)),
      layers_(options_.layers),
      layer_set_(options_.layers, false),
      entries_(size_t(options_.layers) * options_.buckets.size()) {}

TailGraphSet::~TailGraphSet() {
  mla_tail::internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  if (!guard.Enter(device_).ok()) return;
  mla_tail::internal::RelaxedCaptureMode relaxed;
  // An executable graph destroyed while launches of it are in flight is freed once they
  // complete (CUDA's contract), so nothing here waits. The BMM scratch the graphs use is freed
  // by the tail after the last replay that used it (RecordBmmUse).
  for (Entry& entry : entries_) entry.Destroy();
  if (capture_stream_ != nullptr) cudaStreamDestroy(capture_stream_);
}

TailGraphSet::Entry& TailGraphSet::EntryFor(int layer, int bucket_index) {
  return entries_[size_t(layer) * options_.buckets.size() + bucket_index];
}

absl::Status TailGraphSet::CheckLayer(int layer) const {
  if (layer < 0 || layer >= options_.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer = ", layer, " is outside [0, ", options_.layers, ")"));
  }
  if (!layer_set_[layer]) {
    return absl::FailedPreconditionError(
        absl::StrCat("layer ", layer, " has no buffers: call SetLayer first"));
  }
  return absl::OkStatus();
}

int TailGraphSet::max_rows() const {
  return std::max(options_.buckets.back(), options_.max_eager_rows);
}

absl::Status TailGraphSet::CheckRows(int rows) const {
  if (rows < 1 || rows % options_.q != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows = ", rows, " must be a positive multiple of q = ", options_.q));
  }
  return absl::OkStatus();
}

absl::Status TailGraphSet::SetLayer(int layer, const TailBuffers& buffers) {
  mla_tail::internal::CudaErrorScope errors;
  if (layer < 0 || layer >= options_.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer = ", layer, " is outside [0, ", options_.layers, ")"));
  }
  MLA_RETURN_IF_ERROR(mla_tail::ValidateTail({options_.heads, max_rows(), options_.q}, buffers));
  layers_[layer] = buffers;
  layer_set_[layer] = true;
  return absl::OkStatus();
}

absl::StatusOr<int> TailGraphSet::BucketRows(int rows) const {
  MLA_RETURN_IF_ERROR(CheckRows(rows));
  absl::StatusOr<int> index = FindBucket(options_.buckets, rows);
  if (index.ok()) return options_.buckets[*index];
  if (rows <= options_.max_eager_rows) return rows;
  return EagerOutOfRange(index.status(), options_.max_eager_rows);
}

absl::StatusOr<TailGraphSet::Entry> TailGraphSet::CaptureEntry(int layer, int bucket_index) {
  const TailShape shape{options_.heads, options_.buckets[bucket_index], options_.q};
  const TailBuffers& buffers = layers_[layer];
  Entry entry;
  entry.path = mla_tail::MlaTail::Resolve(options_.path, shape);
  entry.applied = buffers;
  // cuBLASLt's heuristic runs here, outside the capture.
  if (entry.path == TailPath::kBmm) {
    MLA_RETURN_IF_ERROR(tail_->PrepareBmm(shape, buffers));
    stats_.scratch_bytes = static_cast<int64_t>(tail_->scratch_bytes());
  }

  MLA_RETURN_IF_CUDA_ERROR(
      cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal),
      "cudaStreamBeginCapture");
  const absl::Status run = tail_->Run(shape, buffers, capture_stream_, entry.path);
  const mla_tail::internal::FaultHooks& faults = mla_tail::internal::ActiveFaultHooks();
  if (run.ok() && faults.during_capture) faults.during_capture(capture_stream_);
  const cudaError_t ended = cudaStreamEndCapture(capture_stream_, &entry.graph);
  if (!run.ok() || ended != cudaSuccess) {
    entry.Destroy();
    if (!run.ok()) return run;
    return internal::CudaStatus(ended,
                                absl::StrCat("capture of layer ", layer, ", bucket ", shape.rows));
  }

  // The kernel nodes that hold the caller's pointers are the graph's first and last (the
  // cuBLASLt nodes lie between): only those are asked for their parameters, since cuBLASLt's
  // own nodes refuse the question.
  size_t count = 0;
  absl::Status found =
      internal::CudaStatus(cudaGraphGetNodes(entry.graph, nullptr, &count), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(count);
  if (found.ok()) {
    found = internal::CudaStatus(cudaGraphGetNodes(entry.graph, nodes.data(), &count),
                                 "cudaGraphGetNodes");
  }
  // The kernel the tail launched for this shape (the fused kernels are different functions).
  internal::KernelLaunch fused_launch;
  internal::FusedTailParams fused_params;
  if (entry.path == TailPath::kFused) {
    const absl::Status planned = mla_tail::internal::TailAccess::PlanFused(
        *tail_, shape, buffers, &fused_launch, &fused_params);
    if (!planned.ok()) {
      entry.Destroy();
      return planned;
    }
  }
  const void* value_kernel = fused_launch.function;
  for (size_t i = 0; found.ok() && i < count; ++i) {
    size_t dependencies = 0, dependents = 0;
    found = internal::CudaStatus(
        cudaGraphNodeGetDependencies(nodes[i], nullptr, nullptr, &dependencies),
        "cudaGraphNodeGetDependencies");
    if (found.ok()) {
      found = internal::CudaStatus(
          cudaGraphNodeGetDependentNodes(nodes[i], nullptr, nullptr, &dependents),
          "cudaGraphNodeGetDependentNodes");
    }
    if (!found.ok() || (dependencies > 0 && dependents > 0)) continue;
    cudaKernelNodeParams params;
    found = internal::CudaStatus(cudaGraphKernelNodeGetParams(nodes[i], &params),
                                 "cudaGraphKernelNodeGetParams");
    if (!found.ok()) break;
    if (value_kernel != nullptr && params.func == value_kernel) {
      entry.value_node = nodes[i];
      entry.value_launch = params;
    } else if (params.func == internal::BmmPointersKernelAddress()) {
      entry.tables_node = nodes[i];
      entry.tables_launch = params;
      entry.tables_args = *static_cast<const internal::BmmPointerParams*>(params.kernelParams[0]);
    }
  }
  const bool complete =
      entry.path == TailPath::kFused ? entry.value_node != nullptr : entry.tables_node != nullptr;
  if (found.ok() && !complete) {
    found = absl::InternalError(absl::StrCat("the captured graph of layer ", layer, ", bucket ",
                                             shape.rows, " lacks the tail's kernel nodes"));
  }
  if (!found.ok()) {
    entry.Destroy();
    return found;
  }
  return entry;
}

absl::Status TailGraphSet::Capture(int layer, int bucket_index) {
  // Our capture and instantiation must neither fail for nor break another thread's capture.
  mla_tail::internal::RelaxedCaptureMode relaxed;
  const absl::Time start = absl::Now();
  absl::StatusOr<Entry> entry = CaptureEntry(layer, bucket_index);
  if (!entry.ok()) return entry.status();
  const cudaError_t instantiated = cudaGraphInstantiate(&entry->exec, entry->graph, 0);
  if (instantiated != cudaSuccess) {
    entry->exec = nullptr;
    entry->Destroy();
    return internal::CudaStatus(instantiated,
                                absl::StrCat("cudaGraphInstantiate (layer ", layer, ", bucket ",
                                             options_.buckets[bucket_index], ")"));
  }
  ++stats_.graphs_captured;
  ++stats_.instantiations;
  stats_.capture_seconds += absl::ToDoubleSeconds(absl::Now() - start);
  Entry& slot = EntryFor(layer, bucket_index);
  slot.Destroy();
  slot = *std::move(entry);
  return absl::OkStatus();
}

absl::Status TailGraphSet::CaptureMeasured(int layer, int bucket_index) {
  size_t free_before = 0, free_after = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  MLA_RETURN_IF_ERROR(Capture(layer, bucket_index));
  cudaMemGetInfo(&free_after, &total);
  if (free_after < free_before) stats_.graph_memory_bytes += int64_t(free_before - free_after);
  return absl::OkStatus();
}

absl::Status TailGraphSet::CaptureAll() {
  mla_tail::internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  for (int layer = 0; layer < options_.layers; ++layer) MLA_RETURN_IF_ERROR(CheckLayer(layer));
  mla_tail::internal::RelaxedCaptureMode relaxed;
  // Memory is measured once around the whole pass: cudaMemGetInfo costs as much as a capture.
  size_t free_before = 0, free_after = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  absl::Status status;
  for (int layer = 0; layer < options_.layers && status.ok(); ++layer) {
    for (size_t b = 0; b < options_.buckets.size() && status.ok(); ++b) {
      if (EntryFor(layer, b).captured()) continue;
      status = Capture(layer, b);
      if (status.ok()) {
        // Ahead of time, so that a first replay costs what every replay costs.
        status = internal::CudaStatus(cudaGraphUpload(EntryFor(layer, b).exec, capture_stream_),
                                      "cudaGraphUpload");
      }
    }
  }
  const absl::Status uploaded =
      internal::CudaStatus(cudaStreamSynchronize(capture_stream_), "graph uploads");
  cudaMemGetInfo(&free_after, &total);
  if (free_after < free_before) stats_.graph_memory_bytes += int64_t(free_before - free_after);
  return status.ok() ? uploaded : status;
}

absl::Status TailGraphSet::Apply(int layer, int bucket_index) {
  Entry& entry = EntryFor(layer, bucket_index);
  const TailBuffers& want = layers_[layer];
  if (SameBuffers(entry.applied, want)) return absl::OkStatus();

  // The GEMM's descriptors hold the latent and W_UV row strides: a change re-captures.
  const bool gemm_changed =
      entry.path == TailPath::kBmm && (want.latent_row_stride != entry.applied.latent_row_stride ||
                                       want.w_row_stride != entry.applied.w_row_stride);
  if (gemm_changed) return CaptureMeasured(layer, bucket_index);

  if (options_.update == UpdateMechanism::kWholeGraph) {
    const absl::Time start = absl::Now();
    absl::StatusOr<Entry> fresh = CaptureEntry(layer, bucket_index);
    if (!fresh.ok()) return fresh.status();
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(entry.exec, fresh->graph, &info) != cudaSuccess) {
      fresh->Destroy();
      return CaptureMeasured(layer, bucket_index);  // CUDA refused: instantiate anew
    }
    fresh->exec = entry.exec;
    entry.exec = nullptr;
    entry.Destroy();
    entry = *std::move(fresh);
    ++stats_.graphs_captured;
    ++stats_.whole_graph_updates;
    stats_.capture_seconds += absl::ToDoubleSeconds(absl::Now() - start);
    return absl::OkStatus();
  }

  const absl::Status status = WriteNodes(bucket_index, want, entry.exec, &entry);
  if (!status.ok()) {
    // Part of the update may have landed: drop the graph rather than ever launch it half
    // updated. The next Replay captures it anew.
    entry.Destroy();
    return status;
  }
  ++stats_.node_updates;
  entry.applied = want;
  // Only exports read the template: it catches up there, keeping one driver call per node off
  // every update.
  entry.template_stale = true;
  return absl::OkStatus();
}

absl::Status TailGraphSet::WriteNodes(int bucket_index, const TailBuffers& buffers,
                                      cudaGraphExec_t exec, Entry* entry) {
  const TailShape shape{options_.heads, options_.buckets[bucket_index], options_.q};
  if (entry->path == TailPath::kFused) {
    return SetKernelArgs(exec, entry->value_node, entry->value_launch,
                         internal::MakeFusedTailParams(shape, buffers));
  }
  return SetKernelArgs(
      exec, entry->tables_node, entry->tables_launch,
      internal::MakeBmmPointerParams(shape, buffers, entry->tables_args.values,
                                     const_cast<void**>(entry->tables_args.a_table)));
}

absl::Status TailGraphSet::Replay(int layer, int rows, cudaStream_t stream) {
  mla_tail::internal::CudaErrorScope errors;
  MLA_RETURN_IF_ERROR(CheckLayer(layer));
  MLA_RETURN_IF_ERROR(CheckRows(rows));
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  // A stream's device never changes: asking CUDA once per stream keeps two driver queries off
  // every replay.
  if (accepted_stream_ != stream) {
    MLA_RETURN_IF_ERROR(tail_->CheckStream(stream));
    accepted_stream_ = stream;
  }
  absl::StatusOr<bool> capturing = mla_tail::internal::IsCapturing(stream);
  if (!capturing.ok()) return capturing.status();

  absl::StatusOr<int> bucket = FindBucket(options_.buckets, rows);
  if (!bucket.ok()) {
    if (rows > options_.max_eager_rows) {
      return EagerOutOfRange(bucket.status(), options_.max_eager_rows);
    }
    ++stats_.eager_runs;
    return tail_->Run({options_.heads, rows, options_.q}, layers_[layer], stream, options_.path);
  }
  if (*capturing) {
    // CUDA refuses a graph launch into a capture: record the bucket's tail there instead.
    const TailShape shape{options_.heads, options_.buckets[*bucket], options_.q};
    return tail_->Run(shape, layers_[layer], stream, options_.path);
  }
  Entry& entry = EntryFor(layer, *bucket);
  if (!entry.captured()) MLA_RETURN_IF_ERROR(CaptureMeasured(layer, *bucket));
  MLA_RETURN_IF_ERROR(Apply(layer, *bucket));
  const Entry& ready = EntryFor(layer, *bucket);
  MLA_RETURN_IF_CUDA_ERROR(cudaGraphLaunch(ready.exec, stream), "cudaGraphLaunch");
  if (ready.path == TailPath::kBmm) {
    MLA_RETURN_IF_ERROR(mla_tail::internal::TailAccess::RecordBmmUse(*tail_, stream));
  }
  ++stats_.replays;
  return absl::OkStatus();
}

absl::StatusOr<cudaGraph_t> TailGraphSet::ExportGraph(int layer, int rows) {
  mla_tail::internal::CudaErrorScope errors;
  MLA_RETURN_IF_ERROR(CheckLayer(layer));
  MLA_RETURN_IF_ERROR(CheckRows(rows));
  absl::StatusOr<int> bucket = FindBucket(options_.buckets, rows);
  if (!bucket.ok()) return bucket.status();
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  if (!EntryFor(layer, *bucket).captured()) {
    MLA_RETURN_IF_ERROR(CaptureMeasured(layer, *bucket));
  }
  MLA_RETURN_IF_ERROR(Apply(layer, *bucket));
  Entry& entry = EntryFor(layer, *bucket);
  if (entry.template_stale) {
    MLA_RETURN_IF_ERROR(WriteNodes(*bucket, entry.applied, /*exec=*/nullptr, &entry));
    entry.template_stale = false;
  }
  cudaGraph_t clone = nullptr;
  mla_tail::internal::RelaxedCaptureMode relaxed;
  MLA_RETURN_IF_CUDA_ERROR(cudaGraphClone(&clone, entry.graph), "cudaGraphClone");
  return clone;
}

}  // namespace mla_tail

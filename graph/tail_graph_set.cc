#include "mla_tail/graph/tail_graph_set.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/fault_hooks.h"
#include "mla/internal/pointer_checks.h"
#include "mla/internal/recent_buffers.h"
#include "mla/internal/tail_access.h"
#include "mla/internal/tail_kernel_node.h"
#include "mla_tail/graph/buckets.h"

namespace mla_tail {

// One (layer, bucket) graph: the captured template (brought up to date with the executable graph
// when exported), its executable graph, and the kernel node that holds the caller's pointers, as
// the capture handed it back (TailAccess::Record, as for RecordTailNode): a pointer update
// rewrites that node through it.
struct TailGraphSet::Entry {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  internal::TailKernelNode node;
  TailBuffers applied;          // the caller's buffers the executable graph holds now
  bool template_stale = false;  // the template still holds older buffers (updated at export)

  bool captured() const { return exec != nullptr; }
  void Destroy() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    *this = Entry();
  }
};

namespace {

// Whether `a` and `b` run the same kernel instantiation (the weight and output types).
bool SameTypes(const TailBuffers& a, const TailBuffers& b) {
  return mla_tail::WeightTypeOf(a) == mla_tail::WeightTypeOf(b) &&
         mla_tail::OutputTypeOf(a) == mla_tail::OutputTypeOf(b);
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

absl::StatusOr<std::unique_ptr<TailGraphSet>> TailGraphSet::Create(
    int device, const GraphSetOptions& options_in) {
  internal::CudaErrorScope errors;
  GraphSetOptions options = options_in;
  if (options.q < 1 || options.q > kMaxQ) {
    return absl::InvalidArgumentError(
        absl::StrCat("q = ", options.q, " is outside [1, ", kMaxQ, "]"));
  }
  if (options.buckets.empty()) options.buckets = DefaultBuckets(options.q);
  MLA_RETURN_IF_ERROR(ValidateBuckets(options.buckets, options.q));
  MLA_RETURN_IF_ERROR(ValidateShape({options.heads, options.buckets.back(), options.q}));
  if (options.layers < 1 || options.layers > kMaxGraphSetLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers = ", options.layers, " is outside [1, ", kMaxGraphSetLayers, "]"));
  }
  if (int64_t{options.layers} * static_cast<int64_t>(options.buckets.size()) > kMaxGraphSetGraphs) {
    return absl::InvalidArgumentError(absl::StrCat("layers x buckets = ", options.layers, " x ",
                                                   options.buckets.size(), " is above ",
                                                   kMaxGraphSetGraphs, " graphs"));
  }
  if (options.max_eager_rows < 0 || options.max_eager_rows > kMaxRows ||
      options.max_eager_rows % options.q != 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_eager_rows = ", options.max_eager_rows,
                                                   " must be in [0, ", kMaxRows,
                                                   "] and a multiple of q = ", options.q));
  }
  MLA_RETURN_IF_ERROR(MlaTail::CheckPathTakes(options.path, TailBuffers{}));  // a TailPath
  TailOptions tail_options;
  // The BMM path's scratch (64 MiB and more) only for a set that takes that path.
  tail_options.bmm = options.path == TailPath::kBmm;
  tail_options.max_heads = options.heads;
  tail_options.max_rows = std::max(options.buckets.back(), options.max_eager_rows);
  tail_options.workspace_bytes = options.workspace_bytes;
  tail_options.pdl = options.pdl;
  tail_options.fused_kernel = options.fused_kernel;
  tail_options.full_pointer_checks = options.full_pointer_checks;
  absl::StatusOr<std::unique_ptr<MlaTail>> tail = MlaTail::Create(device, tail_options);
  if (!tail.ok()) return tail.status();

  std::unique_ptr<TailGraphSet> set(new TailGraphSet(device, std::move(options), *std::move(tail)));
  set->stats_.scratch_bytes = static_cast<int64_t>(set->tail_->scratch_bytes());
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device));
  absl::StatusOr<internal::ContextRef> context = internal::CurrentContextRef();
  if (!context.ok()) return context.status();
  set->context_ = context->handle;
  set->context_id_ = context->id;
  internal::RelaxedCaptureMode relaxed;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&set->capture_stream_, cudaStreamNonBlocking),
                           "cudaStreamCreate(capture stream)");
  return set;
}

TailGraphSet::TailGraphSet(int device, GraphSetOptions options, std::unique_ptr<MlaTail> tail)
    : device_(device),
      options_(std::move(options)),
      tail_(std::move(tail)),
      layers_(options_.layers),
      entries_(size_t(options_.layers) * options_.buckets.size()) {}

TailGraphSet::~TailGraphSet() {
  internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  // Released in the context they were made in, whatever the destroying thread has current (none
  // to release where that context is gone: they went with it).
  if (context_ == nullptr || !guard.EnterContext({context_, context_id_}).ok()) return;
  internal::RelaxedCaptureMode relaxed;
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
  if (!layers_[layer].set) {
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
  internal::CudaErrorScope errors;
  if (layer < 0 || layer >= options_.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer = ", layer, " is outside [0, ", options_.layers, ")"));
  }
  const TailShape shape{options_.heads, max_rows(), options_.q};
  // A set that passed before passes again while the pointer cache has forgotten nothing (the
  // answers depend on the shape, the path, the buffers and the cache alone), but for full
  // pointer checks, which ask CUDA anew.
  LayerState& l = layers_[layer];
  const internal::RecentSets recent{l.checked, l.checked_count, l.checked_stamp};
  const uint64_t stamp = internal::CheckedPointersStamp(device_);
  const bool checked = internal::IsRecent(recent, buffers, stamp);
  if (!checked) {
    MLA_RETURN_IF_ERROR(ValidateTail(shape, buffers));
    MLA_RETURN_IF_ERROR(MlaTail::CheckPathTakes(options_.path, buffers));
  }
  const internal::PointerCheck pointer_check = internal::TailAccess::PointerCheckOf(*tail_);
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  if (!checked || pointer_check == internal::PointerCheck::kEveryCall) {
    MLA_RETURN_IF_ERROR(internal::CheckTailBuffers(device_, shape, buffers, pointer_check));
  }
  l.buffers = buffers;
  l.set = true;
  internal::MakeRecent(recent, buffers, stamp);
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
  const TailBuffers& buffers = layers_[layer].buffers;
  Entry entry;
  entry.applied = buffers;
  // cuBLASLt's heuristic runs here, outside the capture.
  if (bmm()) {
    MLA_RETURN_IF_ERROR(tail_->PrepareBmm(shape, buffers));
    stats_.scratch_bytes = static_cast<int64_t>(tail_->scratch_bytes());
  }

  MLA_RETURN_IF_CUDA_ERROR(
      cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal),
      "cudaStreamBeginCapture");
  const internal::FaultHooks& faults = internal::ActiveFaultHooks();
  if (faults.capture_began) faults.capture_began(capture_stream_);
  absl::StatusOr<internal::TailKernelNode> node =
      internal::TailAccess::Record(*tail_, shape, buffers, capture_stream_, options_.path);
  if (node.ok() && faults.during_capture) faults.during_capture(capture_stream_);
  const cudaError_t ended = cudaStreamEndCapture(capture_stream_, &entry.graph);
  if (!node.ok() || ended != cudaSuccess) {
    entry.Destroy();
    if (!node.ok()) return node.status();
    return internal::CudaStatus(ended,
                                absl::StrCat("capture of layer ", layer, ", bucket ", shape.rows));
  }
  entry.node = *node;
  return entry;
}

absl::Status TailGraphSet::Capture(int layer, int bucket_index) {
  // Our capture and instantiation must neither fail for nor break another thread's capture.
  internal::RelaxedCaptureMode relaxed;
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
  // The queries neither fail for nor break a capture of this or another thread.
  internal::RelaxedCaptureMode relaxed;
  size_t free_before = 0, free_after = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  MLA_RETURN_IF_ERROR(Capture(layer, bucket_index));
  cudaMemGetInfo(&free_after, &total);
  if (free_after < free_before) stats_.graph_memory_bytes += int64_t(free_before - free_after);
  return absl::OkStatus();
}

absl::Status TailGraphSet::CaptureAll() {
  internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  for (int layer = 0; layer < options_.layers; ++layer) MLA_RETURN_IF_ERROR(CheckLayer(layer));
  internal::RelaxedCaptureMode relaxed;
  // Memory is measured once around the whole pass: cudaMemGetInfo costs as much as a capture.
  size_t free_before = 0, free_after = 0, total = 0;
  cudaMemGetInfo(&free_before, &total);
  absl::Status status;
  for (int layer = 0; layer < options_.layers && status.ok(); ++layer) {
    for (size_t b = 0; b < options_.buckets.size() && status.ok(); ++b) {
      if (EntryFor(layer, b).captured()) {
        // Up to date with the layer's present buffers (re-captured where its strides, its gate's
        // presence or its types changed), as a replay would make it: a replay recorded into a
        // caller's capture then finds the BMM plan it needs.
        status = Apply(layer, b, /*measure=*/false);
        continue;
      }
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

absl::Status TailGraphSet::Apply(int layer, int bucket_index, bool measure) {
  Entry& entry = EntryFor(layer, bucket_index);
  const TailBuffers& want = layers_[layer].buffers;
  if (internal::SameBuffers(entry.applied, want)) return absl::OkStatus();

  // The GEMM's descriptors hold the latent and W_UV row strides, and a gate's presence and the
  // weight and output types pick the kernels' form: a change of any re-captures.
  const bool gemm_changed = bmm() && (want.latent_row_stride != entry.applied.latent_row_stride ||
                                      want.w_row_stride != entry.applied.w_row_stride);
  const bool gate_changed = (want.gate == nullptr) != (entry.applied.gate == nullptr);
  if (gemm_changed || gate_changed || !SameTypes(want, entry.applied)) {
    return measure ? CaptureMeasured(layer, bucket_index) : Capture(layer, bucket_index);
  }

  const absl::Status status = entry.node.Write(entry.exec, want);
  if (!status.ok()) {
    // Drop the graph rather than ever launch it with other pointers than the layer's: the next
    // Replay captures it anew.
    internal::RelaxedCaptureMode relaxed;
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

absl::Status TailGraphSet::Replay(int layer, int rows, cudaStream_t stream) {
  internal::CudaErrorScope errors;
  MLA_RETURN_IF_ERROR(CheckLayer(layer));
  MLA_RETURN_IF_ERROR(CheckRows(rows));
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  absl::StatusOr<bool> capturing = internal::IsCapturing(stream);
  if (!capturing.ok()) return internal::OnCallersCapture(capturing.status());
  // A stream's device never changes: asking CUDA once per stream (known by its ID) keeps the
  // device query off every replay. A capturing stream's device cannot be asked (CheckStream lets
  // it pass; the replay is recorded by MlaTail::Run, which checks it): it is asked at its next
  // replay outside a capture. The default streams are the guard's device's own.
  if (*capturing) {
    MLA_RETURN_IF_ERROR(tail_->CheckStream(stream));
  } else if (stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread) {
    unsigned long long stream_id = 0;  // NOLINT(runtime/int): cudaStreamGetId's type
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamGetId(stream, &stream_id), "cudaStreamGetId");
    const auto accepted_end = accepted_stream_ids_.begin() + accepted_count_;
    if (std::find(accepted_stream_ids_.begin(), accepted_end, stream_id) == accepted_end) {
      MLA_RETURN_IF_ERROR(tail_->CheckStream(stream));
      constexpr int kKept = static_cast<int>(std::tuple_size_v<decltype(accepted_stream_ids_)>);
      accepted_stream_ids_[next_accepted_] = stream_id;
      next_accepted_ = (next_accepted_ + 1) % kKept;
      accepted_count_ = std::min(accepted_count_ + 1, kKept);
    }
  }

  absl::StatusOr<int> bucket = FindBucket(options_.buckets, rows);
  if (!bucket.ok()) {
    if (rows > options_.max_eager_rows) {
      return EagerOutOfRange(bucket.status(), options_.max_eager_rows);
    }
    const absl::Status ran = tail_->Run({options_.heads, rows, options_.q}, layers_[layer].buffers,
                                        stream, options_.path);
    // A BMM-path eager run may have allocated the scratch.
    stats_.scratch_bytes = static_cast<int64_t>(tail_->scratch_bytes());
    if (ran.ok()) ++stats_.eager_runs;
    return ran;
  }
  if (*capturing) {
    // CUDA refuses a graph launch into a capture: record the bucket's tail there instead.
    const TailShape shape{options_.heads, options_.buckets[*bucket], options_.q};
    return tail_->Run(shape, layers_[layer].buffers, stream, options_.path);
  }
  Entry& entry = EntryFor(layer, *bucket);
  if (!entry.captured()) MLA_RETURN_IF_ERROR(CaptureMeasured(layer, *bucket));
  MLA_RETURN_IF_ERROR(Apply(layer, *bucket));
  const Entry& ready = EntryFor(layer, *bucket);
  if (const cudaError_t e = cudaGraphLaunch(ready.exec, stream); e != cudaSuccess) {
    // A launch that a capture elsewhere refused (a global-mode capture) is the caller's to end.
    return internal::OnCallersCapture(internal::CudaStatus(e, "cudaGraphLaunch"));
  }
  if (bmm()) {
    MLA_RETURN_IF_ERROR(internal::TailAccess::RecordBmmUse(*tail_, stream));
  }
  ++stats_.replays;
  return absl::OkStatus();
}

absl::StatusOr<cudaGraph_t> TailGraphSet::ExportGraph(int layer, int rows) {
  internal::CudaErrorScope errors;
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
    MLA_RETURN_IF_ERROR(entry.node.Write(/*exec=*/nullptr, entry.applied));
    entry.template_stale = false;
  }
  cudaGraph_t clone = nullptr;
  internal::RelaxedCaptureMode relaxed;
  MLA_RETURN_IF_CUDA_ERROR(cudaGraphClone(&clone, entry.graph), "cudaGraphClone");
  return clone;
}

}  // namespace mla_tail

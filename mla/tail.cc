#include "mla_tail/mla/tail.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "mla/internal/cublaslt.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/device_guard.h"
#include "mla/internal/pointer_checks.h"
#include "mla/internal/tail_access.h"
#include "mla/internal/tail_kernel_node.h"
#include "mla/internal/value_bmm.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/params.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail {

namespace {

// The cuBLASLt handle of the calling thread's current context, made there on first use and
// kept for the process. A handle belongs to the context current at cublasLtCreate, so there is
// one a context, keyed by the context's ID (cuCtxGetId: a later context may reuse a destroyed
// one's address, never its ID). Never destroyed: cublasLtDestroy synchronises the device, which
// would stall every stream and break other threads' stream captures. A handle may be shared
// across threads. cuBLASLt itself is loaded here, on the BMM path's first use.
absl::StatusOr<cublasLtHandle_t> SharedCublasLt() {
  absl::StatusOr<const internal::CublasLtApi*> lt = internal::CublasLt();
  if (!lt.ok()) return lt.status();
  absl::StatusOr<internal::ContextRef> context = internal::CurrentContextRef();
  if (!context.ok()) return context.status();
  static std::mutex mutex;
  static auto* handles = new std::map<unsigned long long, cublasLtHandle_t>();  // NOLINT
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = handles->find(context->id); it != handles->end()) return it->second;
  cublasLtHandle_t handle = nullptr;
  MLA_RETURN_IF_ERROR(internal::CublasStatus((*lt)->cublasLtCreate(&handle), "cublasLtCreate"));
  handles->emplace(context->id, handle);
  return handle;
}

}  // namespace

// The BMM path's device memory, allocated on first use in stream order on the instance's own
// non-blocking stream from a memory pool of its own, and freed the same way after the
// instance's last eager BMM run. A pool of its own, not the device's current one: a shared pool
// may hand out a block another stream freed and make the allocation wait for that stream's
// work, which the allocation's host synchronisation would then wait for too.
struct BmmScratch {
  cudaStream_t stream = nullptr;   // the instance's own: allocations and frees only
  cudaMemPool_t pool = nullptr;    // the instance's own; destroyed once its blocks are freed
  cudaEvent_t last_run = nullptr;  // recorded after each eager (uncaptured) BMM run
  void* workspace = nullptr;
  bf16* values = nullptr;          // [max_heads, max_rows, 128]
  void* operand_tables = nullptr;  // kOperandTableBytes: BmmPointersKernel's output
  size_t bytes = 0;
  internal::ContextRef context;  // the context it was made in, where the destructor releases it
  // Set when a use could not be recorded on `last_run`: the destructor's frees could not be
  // ordered after it, so the scratch stays allocated (for the process).
  bool unordered = false;

  bool allocated() const { return values != nullptr; }
  // Frees what was allocated, in `stream`'s order (nothing null reaches cudaFreeAsync, whose
  // error would replace one the caller has pending), and destroys the pool: CUDA releases it
  // once those frees have run, without waiting here.
  void FreeAsync() const {
    for (void* p : {operand_tables, static_cast<void*>(values), workspace}) {
      if (p != nullptr) cudaFreeAsync(p, stream);
    }
    if (pool != nullptr) cudaMemPoolDestroy(pool);
  }
};

struct MlaTail::Impl {
  int device = 0;
  int multiprocessors = 0;
  TailOptions options;
  BmmScratch bmm;

  struct PlanKey {
    int heads, rows;
    int64_t latent_row_stride, w_row_stride;
    bool operator==(const PlanKey& o) const {
      return heads == o.heads && rows == o.rows && latent_row_stride == o.latent_row_stride &&
             w_row_stride == o.w_row_stride;
    }
    template <typename H>
    friend H AbslHashValue(H h, const PlanKey& k) {
      return H::combine(std::move(h), k.heads, k.rows, k.latent_row_stride, k.w_row_stride);
    }
  };
  absl::flat_hash_map<PlanKey, internal::ValueBmm> plans;

  internal::PointerCheck pointer_check() const {
    return options.full_pointer_checks ? internal::PointerCheck::kEveryCall
                                       : internal::PointerCheck::kCached;
  }
  // The checks of a call that takes `shape` and `buffers` for `path`: validation, the path's
  // types, and, with `guard` entered on the instance's device (it stays there for the caller),
  // what each buffer points at.
  absl::Status CheckCall(const TailShape& shape, const TailBuffers& buffers, TailPath path,
                         internal::DeviceGuard& guard) const {
    MLA_RETURN_IF_ERROR(ValidateTail(shape, buffers));
    MLA_RETURN_IF_ERROR(CheckPathTakes(path, buffers));
    MLA_RETURN_IF_ERROR(guard.Enter(device));
    return internal::CheckTailBuffers(device, shape, buffers, pointer_check());
  }
  // Run() on any stream: validation (pointers included), then the launches. With `recorded`
  // (TailAccess::Record), `stream` must be capturing, and the kernel node that holds the caller's
  // pointers is handed back there.
  absl::Status Run(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                   TailPath path, internal::TailKernelNode* recorded = nullptr);
  absl::Status AllocateBmmScratch();
  absl::StatusOr<const internal::ValueBmm*> Plan(const TailShape& shape, const TailBuffers& buffers,
                                                 bool capturing);
  // The fused kernel's node for `shape` (not yet in a graph): the launch for `buffers`, and the
  // same launch's other form (with a gate when `buffers` have none, and the reverse).
  absl::StatusOr<internal::TailKernelNode> FusedNode(const TailShape& shape,
                                                     const TailBuffers& buffers) const;
  absl::Status RunFused(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                        internal::TailKernelNode* recorded) const;
  absl::Status RunBmm(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                      internal::TailKernelNode* recorded);
};

const char* TailPathName(TailPath path) {
  switch (path) {
    case TailPath::kAuto:
      return "auto";
    case TailPath::kFused:
      return "fused";
    case TailPath::kBmm:
      return "bmm";
  }
  return "?";
}

MlaTail::MlaTail(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

int MlaTail::device() const { return impl_->device; }
const TailOptions& MlaTail::options() const { return impl_->options; }
size_t MlaTail::scratch_bytes() const { return impl_->bmm.bytes; }

absl::StatusOr<std::unique_ptr<MlaTail>> MlaTail::Create(int device, const TailOptions& options) {
  internal::CudaErrorScope errors;
  if (options.max_heads < 1 || options.max_heads > kMaxHeads) {
    return absl::InvalidArgumentError(absl::StrCat("TailOptions.max_heads = ", options.max_heads,
                                                   " is outside [1, ", kMaxHeads, "]"));
  }
  if (options.max_rows < 1 || options.max_rows > kMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat("TailOptions.max_rows = ", options.max_rows,
                                                   " is outside [1, ", kMaxRows, "]"));
  }
  if (options.fused_kernel != FusedKernel::kAuto &&
      std::find(std::begin(kFusedKernels), std::end(kFusedKernels), options.fused_kernel) ==
          std::end(kFusedKernels)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TailOptions.fused_kernel = ", static_cast<int>(options.fused_kernel),
                     " is not a FusedKernel"));
  }
  MLA_RETURN_IF_ERROR(internal::CheckDevice(device));
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device));
  internal::RelaxedCaptureMode relaxed;

  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->options = options;
  MLA_RETURN_IF_CUDA_ERROR(internal::MultiprocessorCount(device, &impl->multiprocessors),
                           "cudaDeviceGetAttribute(multiprocessors)");
  // Loaded now, so that a first Run() inside a capture loads nothing.
  MLA_RETURN_IF_CUDA_ERROR(internal::LoadTailKernels(), "loading the tail's kernels");
  return std::unique_ptr<MlaTail>(new MlaTail(std::move(impl)));
}

MlaTail::~MlaTail() {
  BmmScratch& s = impl_->bmm;
  if (s.stream == nullptr) return;  // the fused path holds no device memory
  internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  // Released in the context it was made in, whatever the destroying thread has current. Where
  // that context is gone (destroyed, its handle another context's, the driver unloading at
  // process exit), its stream and event went with it, and nothing is released: the scratch
  // (stream-ordered memory, which belongs to no context) stays allocated (docs/spec.md).
  if (!guard.EnterContext(s.context).ok()) return;
  internal::RelaxedCaptureMode relaxed;
  // Stream order: the frees wait for the last eager BMM run on the GPU, the host does not.
  const bool ordered =
      !s.unordered &&
      (s.last_run == nullptr || cudaStreamWaitEvent(s.stream, s.last_run, 0) == cudaSuccess);
  if (ordered) s.FreeAsync();
  impl_->plans.clear();
  if (s.last_run != nullptr) cudaEventDestroy(s.last_run);
  cudaStreamDestroy(s.stream);  // its resources go once its frees have run
}

absl::Status MlaTail::Impl::AllocateBmmScratch() {
  if (bmm.allocated()) return absl::OkStatus();
  internal::RelaxedCaptureMode relaxed;
  BmmScratch s;
  absl::StatusOr<internal::ContextRef> context = internal::CurrentContextRef();  // the guard's
  if (!context.ok()) return context.status();
  s.context = *context;
  // On failure, whatever was made is released in stream order by the same path as the
  // destructor's: kept in `bmm` only once complete.
  auto release = [&s] {
    if (s.stream == nullptr) return;
    s.FreeAsync();
    if (s.last_run != nullptr) cudaEventDestroy(s.last_run);
    cudaStreamDestroy(s.stream);
  };
  absl::Status status = internal::CudaStatus(
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate(BMM scratch)");
  if (status.ok()) {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    status = internal::CudaStatus(cudaMemPoolCreate(&s.pool, &props), "cudaMemPoolCreate(BMM)");
  }
  if (status.ok()) {
    status = internal::CudaStatus(cudaEventCreateWithFlags(&s.last_run, cudaEventDisableTiming),
                                  "cudaEventCreate(BMM runs)");
  }
  const size_t values_bytes =
      static_cast<size_t>(options.max_heads) * options.max_rows * kValueDim * sizeof(bf16);
  if (status.ok() && options.workspace_bytes > 0) {
    status = internal::CudaStatus(
        cudaMallocFromPoolAsync(&s.workspace, options.workspace_bytes, s.pool, s.stream),
        "cudaMallocFromPoolAsync(cuBLASLt workspace)");
  }
  if (status.ok()) {
    status = internal::CudaStatus(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&s.values),
                                                          values_bytes, s.pool, s.stream),
                                  "cudaMallocFromPoolAsync(BMM values)");
  }
  if (status.ok()) {
    status = internal::CudaStatus(
        cudaMallocFromPoolAsync(&s.operand_tables, internal::kOperandTableBytes, s.pool, s.stream),
        "cudaMallocFromPoolAsync(BMM operand tables)");
  }
  // NaN until the GEMM writes it: a value the GEMM failed to write shows in the output, and
  // initcheck, which cannot follow cuBLASLt's bulk-copy stores, sees defined memory.
  if (status.ok()) {
    status = internal::CudaStatus(cudaMemsetAsync(s.values, 0xff, values_bytes, s.stream),
                                  "cudaMemsetAsync(BMM values)");
  }
  // The memory must be usable from any stream before the first run: wait for our own stream
  // (its allocations come from the instance's pool, so this waits for nothing of the caller's).
  if (status.ok()) {
    status = internal::CudaStatus(cudaStreamSynchronize(s.stream), "allocating the BMM scratch");
  }
  if (!status.ok()) {
    release();
    return status;
  }
  s.bytes = options.workspace_bytes + values_bytes + internal::kOperandTableBytes;
  bmm = s;
  return absl::OkStatus();
}

absl::Status MlaTail::CheckPathTakes(TailPath path, const TailBuffers& buffers) {
  if (path != TailPath::kAuto && path != TailPath::kFused && path != TailPath::kBmm) {
    return absl::InvalidArgumentError(
        absl::StrCat("path = ", static_cast<int>(path), " is not a TailPath"));
  }
  if (path != TailPath::kBmm) return absl::OkStatus();
  if (WeightTypeOf(buffers) != WeightType::kBf16) {
    return absl::UnimplementedError(
        "the BMM path takes bf16 W_UV only: e4m3 W_UV (w_uv_fp8) runs on the fused path");
  }
  if (OutputTypeOf(buffers) != OutputType::kBf16) {
    return absl::UnimplementedError(
        "the BMM path writes a bf16 output only: an e4m3 output (output_fp8) runs on the fused "
        "path");
  }
  return absl::OkStatus();
}

FusedKernel MlaTail::FusedKernelFor(const TailShape& shape, WeightType weight,
                                    OutputType output) const {
  return internal::ResolveFusedKernel(impl_->options.fused_kernel, shape.heads, shape.rows,
                                      impl_->multiprocessors, weight, output);
}

namespace {

// MlaTail::CheckStream for an instance of `device`.
absl::Status CheckStreamOf(int device, cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return absl::OkStatus();  // the current device's default stream: the guard made it ours
  }
  // CUDA refuses to name a capturing stream's device (and the refusal would break the capture):
  // under capture, a stream of another device fails at the first launch instead.
  absl::StatusOr<bool> capturing = internal::IsCapturing(stream);
  if (!capturing.ok()) return capturing.status();
  if (*capturing) return absl::OkStatus();
  int stream_device = -1;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamGetDevice(stream, &stream_device), "cudaStreamGetDevice");
  if (stream_device != device) {
    return absl::InvalidArgumentError(absl::StrCat("stream belongs to device ", stream_device,
                                                   "; this MlaTail runs on device ", device));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MlaTail::CheckStream(cudaStream_t stream) const {
  internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(impl_->device));
  return internal::OnCallersCapture(CheckStreamOf(impl_->device, stream));
}

absl::StatusOr<const internal::ValueBmm*> MlaTail::Impl::Plan(const TailShape& shape,
                                                              const TailBuffers& buffers,
                                                              bool capturing) {
  if (!options.bmm) {
    return absl::FailedPreconditionError(
        "this MlaTail was created without the BMM path (TailOptions::bmm = false)");
  }
  if (shape.heads > options.max_heads || shape.rows > options.max_rows) {
    return absl::OutOfRangeError(absl::StrCat("the BMM path of this MlaTail holds at most ",
                                              options.max_heads, " heads x ", options.max_rows,
                                              " rows (TailOptions); got heads = ", shape.heads,
                                              ", rows = ", shape.rows));
  }
  const PlanKey key{shape.heads, shape.rows, buffers.latent_row_stride, buffers.w_row_stride};
  if (auto it = plans.find(key); it != plans.end()) return &it->second;
  if (capturing) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the BMM path is not prepared for heads = ", shape.heads, ", rows = ", shape.rows,
        " and these strides: call PrepareBmm() before capturing (a TailGraphSet: CaptureAll(), "
        "or a Replay outside a capture, of that bucket with these strides)"));
  }
  // cuBLASLt first, and the GEMM planned before the scratch is allocated: without cuBLASLt, or
  // for a GEMM it cannot run, nothing is held. Loading cuBLASLt, making its handle and planning
  // may allocate: relaxed, so that no other thread's capture is broken.
  internal::ValueBmmShape bmm_shape;
  bmm_shape.heads = shape.heads;
  bmm_shape.rows = shape.rows;
  bmm_shape.latent_row_stride = buffers.latent_row_stride;
  bmm_shape.w_row_stride = buffers.w_row_stride;
  absl::StatusOr<internal::ValueBmm> plan = [&]() -> absl::StatusOr<internal::ValueBmm> {
    internal::RelaxedCaptureMode relaxed;
    absl::StatusOr<cublasLtHandle_t> handle = SharedCublasLt();
    if (!handle.ok()) return handle.status();
    return internal::ValueBmm::Create(*handle, bmm_shape, options.workspace_bytes);
  }();
  if (!plan.ok()) return plan.status();
  MLA_RETURN_IF_ERROR(AllocateBmmScratch());
  return &plans.emplace(key, *std::move(plan)).first->second;
}

absl::Status MlaTail::PrepareBmm(const TailShape& shape, const TailBuffers& buffers) {
  internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(impl_->CheckCall(shape, buffers, TailPath::kBmm, guard));
  return impl_->Plan(shape, buffers, /*capturing=*/false).status();
}

absl::Status MlaTail::CheckBuffers(const TailShape& shape, const TailBuffers& buffers,
                                   TailPath path) const {
  internal::CudaErrorScope errors;
  internal::DeviceGuard guard;
  return impl_->CheckCall(shape, buffers, path, guard);
}

absl::Status MlaTail::Run(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                          TailPath path) {
  internal::CudaErrorScope errors;
  // `stream` is the caller's: a capture of theirs that CUDA refuses is theirs to begin anew.
  return internal::OnCallersCapture(impl_->Run(shape, buffers, stream, path));
}

absl::Status MlaTail::Impl::Run(const TailShape& shape, const TailBuffers& buffers,
                                cudaStream_t stream, TailPath path,
                                internal::TailKernelNode* recorded) {
  internal::DeviceGuard guard;
  MLA_RETURN_IF_ERROR(CheckCall(shape, buffers, path, guard));
  MLA_RETURN_IF_ERROR(CheckStreamOf(device, stream));
  if (recorded != nullptr) {
    absl::StatusOr<bool> capturing = internal::IsCapturing(stream);
    if (!capturing.ok()) return capturing.status();
    if (!*capturing) {
      return absl::FailedPreconditionError(
          "recording the tail's node needs a capturing stream; launch with MlaTail::Run "
          "otherwise");
    }
  }
  return path == TailPath::kBmm ? RunBmm(shape, buffers, stream, recorded)
                                : RunFused(shape, buffers, stream, recorded);
}

absl::StatusOr<internal::TailKernelNode> MlaTail::Impl::FusedNode(
    const TailShape& shape, const TailBuffers& buffers) const {
  // A launch depends on the shape and on whether there is a gate: the other form is planned from
  // any non-null gate, never dereferenced.
  TailBuffers other = buffers;
  other.gate = buffers.gate != nullptr ? nullptr : buffers.latent;
  internal::TailKernelNode node;
  node.shape = shape;
  const TailBuffers* forms[] = {&buffers, &other};
  for (const TailBuffers* b : forms) {
    MLA_RETURN_IF_CUDA_ERROR(
        internal::PlanFusedKernel(internal::MakeFusedTailParams(shape, *b), options.fused_kernel,
                                  multiprocessors, &node.launches[b->gate != nullptr]),
        "planning the fused kernel");
  }
  return node;
}

absl::Status MlaTail::Impl::RunFused(const TailShape& shape, const TailBuffers& b,
                                     cudaStream_t stream,
                                     internal::TailKernelNode* recorded) const {
  const internal::FusedTailParams params = internal::MakeFusedTailParams(shape, b);
  internal::KernelLaunch launch;
  MLA_RETURN_IF_CUDA_ERROR(
      internal::PlanFusedKernel(params, options.fused_kernel, multiprocessors, &launch),
      "planning the fused kernel");
  // A recorded node's launches are planned before anything is enqueued; its node once captured.
  if (recorded != nullptr) {
    absl::StatusOr<internal::TailKernelNode> node = FusedNode(shape, b);
    if (!node.ok()) return node.status();
    *recorded = *std::move(node);
  }
  MLA_RETURN_IF_CUDA_ERROR(internal::LaunchKernel(launch, &params, stream, options.pdl),
                           "fused kernel launch");
  if (recorded == nullptr) return absl::OkStatus();
  absl::StatusOr<cudaGraphNode_t> captured =
      internal::LastCapturedNode(stream, launch, &params, sizeof(params));
  if (!captured.ok()) return captured.status();
  recorded->node = *captured;
  return absl::OkStatus();
}

absl::Status MlaTail::Impl::RunBmm(const TailShape& shape, const TailBuffers& b,
                                   cudaStream_t stream, internal::TailKernelNode* recorded) {
  absl::StatusOr<bool> capturing = internal::IsCapturing(stream);
  if (!capturing.ok()) return capturing.status();
  // Planned before anything is enqueued, so a missing algorithm launches nothing.
  absl::StatusOr<const internal::ValueBmm*> plan = Plan(shape, b, *capturing);
  if (!plan.ok()) return plan.status();

  const internal::BmmPointerParams tables =
      internal::MakeBmmPointerParams(shape, b, bmm.values, bmm.operand_tables);
  const internal::KernelLaunch pointers = internal::PlanBmmPointers();
  MLA_RETURN_IF_CUDA_ERROR(internal::LaunchKernel(pointers, &tables, stream, options.pdl),
                           "BmmPointersKernel launch");
  // From here the scratch is in use on `stream`: should a later launch fail, the destructor's
  // frees still wait for what was enqueued. A captured run is the caller's graph's to order.
  absl::Cleanup mark_use = [&] {
    if (!*capturing && cudaEventRecord(bmm.last_run, stream) != cudaSuccess) bmm.unordered = true;
  };
  if (recorded != nullptr) {
    absl::StatusOr<cudaGraphNode_t> node =
        internal::LastCapturedNode(stream, pointers, &tables, sizeof(tables));
    if (!node.ok()) return node.status();
    *recorded = internal::TailKernelNode{
        *node, {pointers, pointers}, shape, bmm.values, bmm.operand_tables};
  }
  {
    // cuBLASLt may load its kernels at the GEMM's first run (lazy loading allocates): outside a
    // capture of this stream, relaxed, so that no other thread's global-mode capture is broken.
    std::optional<internal::RelaxedCaptureMode> relaxed;
    if (!*capturing) relaxed.emplace();
    MLA_RETURN_IF_ERROR((*plan)->RunPointerArray(tables.a_table, tables.b_table, tables.d_table,
                                                 bmm.workspace, stream));
  }
  const internal::BmmGateParams gate = internal::MakeBmmGateParams(shape, tables);
  MLA_RETURN_IF_CUDA_ERROR(
      internal::LaunchKernel(internal::PlanBmmGate(shape.heads, shape.rows, b.gate != nullptr),
                             &gate, stream, options.pdl),
      "BmmGateKernel launch");
  // What the destructor's frees wait for. A captured run is the caller's graph's to order.
  std::move(mark_use).Cancel();
  if (!*capturing) {
    if (const cudaError_t e = cudaEventRecord(bmm.last_run, stream); e != cudaSuccess) {
      bmm.unordered = true;
      return internal::CudaStatus(e, "cudaEventRecord(after the launched BMM run)");
    }
  }
  return absl::OkStatus();
}

namespace internal {

absl::StatusOr<TailKernelNode> TailAccess::Record(const MlaTail& tail, const TailShape& shape,
                                                  const TailBuffers& buffers, cudaStream_t stream,
                                                  TailPath path) {
  // Under capture the BMM path only looks its plan up: the tail's state does not change.
  TailKernelNode node;
  MLA_RETURN_IF_ERROR(tail.impl_->Run(shape, buffers, stream, path, &node));
  return node;
}

absl::StatusOr<TailKernelNode> TailAccess::FusedNode(const MlaTail& tail, const TailShape& shape,
                                                     const TailBuffers& buffers) {
  return tail.impl_->FusedNode(shape, buffers);
}

PointerCheck TailAccess::PointerCheckOf(const MlaTail& tail) { return tail.impl_->pointer_check(); }

absl::Status TailAccess::RecordBmmUse(MlaTail& tail, cudaStream_t stream) {
  BmmScratch& s = tail.impl_->bmm;
  if (s.last_run == nullptr) return absl::OkStatus();
  if (const cudaError_t e = cudaEventRecord(s.last_run, stream); e != cudaSuccess) {
    s.unordered = true;
    return CudaStatus(e, "cudaEventRecord(after the launched BMM replay)");
  }
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace mla_tail

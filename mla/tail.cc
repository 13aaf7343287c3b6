#include "mla/tail.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "mla/cuda_status.h"
#include "mla/device_guard.h"
#include "mla/dispatch.h"
#include "mla/kernels/params.h"

namespace mla {

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

absl::StatusOr<std::unique_ptr<MlaTail>> MlaTail::Create(int device, const TailOptions& options) {
  if (options.max_heads < 1 || options.max_heads > kMaxHeads) {
    return absl::InvalidArgumentError(absl::StrCat("TailOptions.max_heads = ", options.max_heads,
                                                   " is outside [1, ", kMaxHeads, "]"));
  }
  if (options.max_rows < 1 || options.max_rows > kMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat("TailOptions.max_rows = ", options.max_rows,
                                                   " is outside [1, ", kMaxRows, "]"));
  }
  MLA_RETURN_IF_ERROR(CheckDevice(device));
  DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device));

  // Per device, and never during a capture: Run() may be the first launch and be captured.
  MLA_RETURN_IF_CUDA_ERROR(PrepareTailKernels(), "PrepareTailKernels");

  // Destroyed (with whatever was allocated) on any early return.
  std::unique_ptr<MlaTail> tail(new MlaTail(device, options));
  if (!options.bmm) return tail;
  MLA_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&tail->cublaslt_), "cublasLtCreate"));
  if (options.workspace_bytes > 0) {
    MLA_RETURN_IF_CUDA_ERROR(cudaMalloc(&tail->workspace_, options.workspace_bytes),
                             "cudaMalloc(cuBLASLt workspace)");
  }
  const size_t values_bytes =
      size_t{static_cast<size_t>(options.max_heads)} * options.max_rows * kValueDim * sizeof(bf16);
  MLA_RETURN_IF_CUDA_ERROR(cudaMalloc(&tail->values_, values_bytes), "cudaMalloc(values)");
  // NaN until the GEMM writes it: a value the GEMM failed to write shows in the output, and
  // initcheck, which cannot follow cuBLASLt's bulk-copy stores, sees defined memory.
  MLA_RETURN_IF_CUDA_ERROR(cudaMemset(tail->values_, 0xff, values_bytes), "cudaMemset(values)");
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMalloc(&tail->operand_tables_, kOperandTableBytes),
      "cudaMalloc(operand tables)");
  tail->scratch_bytes_ = options.workspace_bytes + values_bytes + kOperandTableBytes;
  return tail;
}

MlaTail::~MlaTail() {
  DeviceGuard guard;
  if (!guard.Enter(device_).ok()) return;
  // Work enqueued on this instance's scratch must finish before the memory goes back.
  cudaDeviceSynchronize();
  cudaFree(operand_tables_);
  cudaFree(values_);
  cudaFree(workspace_);
  plans_.clear();
  if (cublaslt_ != nullptr) cublasLtDestroy(cublaslt_);
}

TailPath MlaTail::Resolve(TailPath path, const TailShape& shape) {
  if (path != TailPath::kAuto) return path;
  return value_bmm(shape.heads, shape.rows) ? TailPath::kBmm : TailPath::kFused;
}

absl::Status MlaTail::CheckStream(cudaStream_t stream) const {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return absl::OkStatus();  // the current device's default stream: the guard made it ours
  }
  // CUDA refuses to name a capturing stream's device (and the refusal would break the capture):
  // under capture, a stream of another device fails at the first launch instead.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) return absl::OkStatus();
  int stream_device = -1;
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamGetDevice(stream, &stream_device), "cudaStreamGetDevice");
  if (stream_device != device_) {
    return absl::InvalidArgumentError(absl::StrCat("stream belongs to device ", stream_device,
                                                   "; this MlaTail runs on device ", device_));
  }
  return absl::OkStatus();
}

absl::StatusOr<const ValueBmm*> MlaTail::Plan(const TailShape& shape,
                                              const TailBuffers& buffers) {
  if (!options_.bmm) {
    return absl::FailedPreconditionError(
        "this MlaTail was created without the BMM path's scratch (TailOptions::bmm = false)");
  }
  if (shape.heads > options_.max_heads || shape.rows > options_.max_rows) {
    return absl::OutOfRangeError(absl::StrCat(
        "the BMM path of this MlaTail holds at most ", options_.max_heads, " heads x ",
        options_.max_rows, " rows (TailOptions); got heads = ", shape.heads,
        ", rows = ", shape.rows));
  }
  const PlanKey key{shape.heads, shape.rows, buffers.latent_row_stride, buffers.w_row_stride};
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  ValueBmmShape bmm_shape;
  bmm_shape.heads = shape.heads;
  bmm_shape.rows = shape.rows;
  bmm_shape.latent_row_stride = buffers.latent_row_stride;
  bmm_shape.w_head_stride = buffers.w_head_stride;
  bmm_shape.w_row_stride = buffers.w_row_stride;
  absl::StatusOr<ValueBmm> plan = ValueBmm::Create(cublaslt_, bmm_shape,
                                                   BmmBatchMode::kPointerArray,
                                                   options_.workspace_bytes, options_.faults);
  if (!plan.ok()) return plan.status();
  return &plans_.emplace(key, *std::move(plan)).first->second;
}

absl::Status MlaTail::PrepareBmm(const TailShape& shape, const TailBuffers& buffers) {
  MLA_RETURN_IF_ERROR(ValidateTail(shape, buffers));
  DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  return Plan(shape, buffers).status();
}

absl::Status MlaTail::Run(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                          TailPath path) {
  MLA_RETURN_IF_ERROR(ValidateTail(shape, buffers));
  DeviceGuard guard;
  MLA_RETURN_IF_ERROR(guard.Enter(device_));
  MLA_RETURN_IF_ERROR(CheckStream(stream));
  return Resolve(path, shape) == TailPath::kBmm ? RunBmm(shape, buffers, stream)
                                                : RunFused(shape, buffers, stream);
}

absl::Status MlaTail::RunFused(const TailShape& shape, const TailBuffers& b,
                               cudaStream_t stream) {
  return CudaStatus(LaunchMlaValue(MakeMlaValueParams(shape, b), stream, options_.pdl,
                                   options_.fused_variant),
                    "MlaValue launch");
}

absl::Status MlaTail::RunBmm(const TailShape& shape, const TailBuffers& b, cudaStream_t stream) {
  // Planned before anything is enqueued, so a missing algorithm launches nothing.
  absl::StatusOr<const ValueBmm*> plan = Plan(shape, b);
  if (!plan.ok()) return plan.status();

  const BmmPointerParams tables = MakeBmmPointerParams(shape, b, values_, operand_tables_);
  MLA_RETURN_IF_CUDA_ERROR(LaunchBmmPointers(tables, stream, options_.pdl),
                           "BmmPointers launch");
  MLA_RETURN_IF_ERROR((*plan)->RunPointerArray(tables.a_table, tables.b_table, tables.d_table,
                                               workspace_, stream));
  return CudaStatus(LaunchMlaGate(MakeMlaGateParams(shape, tables), stream, options_.pdl),
                    "MlaGate launch");
}

}  // namespace mla

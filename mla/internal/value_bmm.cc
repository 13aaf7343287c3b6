#include "mla/internal/value_bmm.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "mla/internal/cublaslt.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/mla/errors.h"

namespace mla_tail::internal {

absl::Status CublasStatus(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  // A status of cuBLASLt's comes from a loaded cuBLASLt, which names it.
  absl::StatusOr<const CublasLtApi*> lt = CublasLt();
  const std::string message =
      lt.ok() ? absl::StrCat(what, ": ", (*lt)->cublasLtGetStatusName(status), " (",
                             (*lt)->cublasLtGetStatusString(status), ")")
              : absl::StrCat(what, ": cuBLAS status ", static_cast<int>(status));
  // INVALID_VALUE is Internal: the descriptors are the library's own, built from validated
  // arguments (as cudaErrorInvalidValue from its CUDA calls; docs/spec.md, "Errors").
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

#define MLA_RETURN_IF_CUBLAS_ERROR(expr, what)                     \
  do {                                                             \
    const absl::Status _mla_status = CublasStatus((expr), (what)); \
    if (!_mla_status.ok()) return _mla_status;                     \
  } while (false)

struct ValueBmm::Descriptors {
  explicit Descriptors(const CublasLtApi& lt) : lt(lt) {}
  const CublasLtApi& lt;
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};

  ~Descriptors() {
    if (d != nullptr) lt.cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) lt.cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) lt.cublasLtMatrixLayoutDestroy(a);
    if (matmul != nullptr) lt.cublasLtMatmulDescDestroy(matmul);
  }
};

namespace {

// A layout of `heads` matrices whose addresses the GEMM reads from a device array.
absl::Status MakeLayout(const CublasLtApi& lt, cublasLtMatrixLayout_t* layout, uint64_t rows,
                        uint64_t cols, int64_t ld, int heads) {
  MLA_RETURN_IF_CUBLAS_ERROR(lt.cublasLtMatrixLayoutCreate(layout, CUDA_R_16BF, rows, cols, ld),
                             "cublasLtMatrixLayoutCreate");
  const int32_t count = heads;
  MLA_RETURN_IF_CUBLAS_ERROR(
      lt.cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                          sizeof(count)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
  const int32_t pointer_array = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
  MLA_RETURN_IF_CUBLAS_ERROR(
      lt.cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE,
                                          &pointer_array, sizeof(pointer_array)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_MODE)");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValueBmm> ValueBmm::Create(cublasLtHandle_t handle, const ValueBmmShape& shape,
                                          size_t workspace_bytes, const FaultHooks& faults) {
  absl::StatusOr<const CublasLtApi*> loaded = CublasLt();
  if (!loaded.ok()) return loaded.status();
  const CublasLtApi& lt = **loaded;
  auto descriptors = std::make_shared<Descriptors>(lt);
  MLA_RETURN_IF_CUBLAS_ERROR(
      lt.cublasLtMatmulDescCreate(&descriptors->matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  MLA_RETURN_IF_CUBLAS_ERROR(
      lt.cublasLtMatmulDescSetAttribute(descriptors->matmul, CUBLASLT_MATMUL_DESC_TRANSA,
                                        &transpose, sizeof(transpose)),
      "cublasLtMatmulDescSetAttribute(TRANSA)");

  if (absl::Status s =
          MakeLayout(lt, &descriptors->a, kLatentDim, kValueDim, shape.w_row_stride, shape.heads);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = MakeLayout(lt, &descriptors->b, kLatentDim, shape.rows,
                                  shape.latent_row_stride, shape.heads);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          MakeLayout(lt, &descriptors->d, kValueDim, shape.rows, kValueDim, shape.heads);
      !s.ok()) {
    return s;
  }

  cublasLtMatmulPreference_t preference = nullptr;
  MLA_RETURN_IF_CUBLAS_ERROR(lt.cublasLtMatmulPreferenceCreate(&preference),
                             "cublasLtMatmulPreferenceCreate");
  // Operands may move to any 16-byte aligned address (pointer updates): no larger alignment.
  const uint32_t alignment = 16;
  cublasStatus_t status =
      lt.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &workspace_bytes, sizeof(workspace_bytes));
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = lt.cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment,
                                                       sizeof(alignment));
    }
  }
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = lt.cublasLtMatmulAlgoGetHeuristic(handle, descriptors->matmul, descriptors->a,
                                               descriptors->b, descriptors->d, descriptors->d,
                                               preference, 1, &result, &found);
    // The heuristic's NOT_SUPPORTED is its "no algorithm for this GEMM": NotFound below.
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
      status = CUBLAS_STATUS_SUCCESS;
      found = 0;
    }
  }
  lt.cublasLtMatmulPreferenceDestroy(preference);
  MLA_RETURN_IF_CUBLAS_ERROR(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found > 0 && faults.bmm_finds_no_algorithm && faults.bmm_finds_no_algorithm()) found = 0;
  if (found == 0) {
    return absl::NotFoundError(absl::StrCat(
        "cuBLASLt found no algorithm for the W_UV batched GEMM: heads = ", shape.heads,
        ", rows = ", shape.rows, ", latent_row_stride = ", shape.latent_row_stride,
        ", w_row_stride = ", shape.w_row_stride, ", workspace = ", workspace_bytes, " bytes"));
  }
  descriptors->algo = result.algo;
  return ValueBmm(shape, handle, std::move(descriptors), workspace_bytes);
}

ValueBmm::ValueBmm(ValueBmmShape shape, cublasLtHandle_t handle,
                   std::shared_ptr<Descriptors> descriptors, size_t workspace_bytes)
    : shape_(shape),
      handle_(handle),
      descriptors_(std::move(descriptors)),
      workspace_bytes_(workspace_bytes) {}

absl::Status ValueBmm::RunPointerArray(const void* const* w_uv_table,
                                       const void* const* latent_table, void* const* values_table,
                                       void* workspace, cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  const Descriptors& x = *descriptors_;
  void* d = const_cast<void*>(static_cast<const void*>(values_table));
  const cublasStatus_t status =
      x.lt.cublasLtMatmul(handle_, x.matmul, &alpha, w_uv_table, x.a, latent_table, x.b, &beta, d,
                          x.d, d, x.d, &x.algo, workspace, workspace_bytes_, stream);
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  // cuBLASLt reports CUDA's failures as statuses of its own: a sticky CUDA error (the context is
  // lost) and a capture of the stream's that CUDA invalidated are told by CUDA's own error, as
  // every other call's are.
  // cuBLASLt links a CUDA runtime of its own, whose errors this runtime's error state does not
  // hold: the stream is asked instead (a call into the context returns its sticky error). The
  // legacy stream is never asked (IsCapturing).
  cudaError_t cuda = cudaPeekAtLastError();
  if (!IsStickyCudaError(cuda) && stream != nullptr && stream != cudaStreamLegacy) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t asked = cudaStreamIsCapturing(stream, &capture);
    if (asked == cudaSuccess && capture == cudaStreamCaptureStatusInvalidated) {
      return CudaStatus(cudaErrorStreamCaptureInvalidated, "cublasLtMatmul");
    }
    cuda = asked;
  }
  if (IsStickyCudaError(cuda)) return CudaStatus(cuda, "cublasLtMatmul");
  return CublasStatus(status, "cublasLtMatmul");
}

}  // namespace mla_tail::internal

#include "mla/internal/value_bmm.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace mla_tail::internal {

absl::Status CublasStatus(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cublasLtGetStatusName(status), " (",
                                           cublasLtGetStatusString(status), ")");
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
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
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};

  ~Descriptors() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (matmul != nullptr) cublasLtMatmulDescDestroy(matmul);
  }
};

namespace {

absl::Status MakeLayout(cublasLtMatrixLayout_t* layout, uint64_t rows, uint64_t cols, int64_t ld,
                        int heads, int64_t batch_stride, BmmBatchMode mode) {
  MLA_RETURN_IF_CUBLAS_ERROR(cublasLtMatrixLayoutCreate(layout, CUDA_R_16BF, rows, cols, ld),
                             "cublasLtMatrixLayoutCreate");
  const int32_t count = heads;
  MLA_RETURN_IF_CUBLAS_ERROR(
      cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                       sizeof(count)),
      "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
  if (mode == BmmBatchMode::kStrided) {
    MLA_RETURN_IF_CUBLAS_ERROR(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                         &batch_stride, sizeof(batch_stride)),
        "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  } else {
    const int32_t pointer_array = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    MLA_RETURN_IF_CUBLAS_ERROR(
        cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &pointer_array,
                                         sizeof(pointer_array)),
        "cublasLtMatrixLayoutSetAttribute(BATCH_MODE)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValueBmm> ValueBmm::Create(cublasLtHandle_t handle, const ValueBmmShape& shape,
                                          BmmBatchMode mode, size_t workspace_bytes,
                                          const FaultHooks& faults) {
  auto descriptors = std::make_shared<Descriptors>();
  MLA_RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulDescCreate(&descriptors->matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  MLA_RETURN_IF_CUBLAS_ERROR(
      cublasLtMatmulDescSetAttribute(descriptors->matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                     sizeof(transpose)),
      "cublasLtMatmulDescSetAttribute(TRANSA)");

  if (absl::Status s = MakeLayout(&descriptors->a, kLatentDim, kValueDim, shape.w_row_stride,
                                  shape.heads, shape.w_head_stride, mode);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = MakeLayout(&descriptors->b, kLatentDim, shape.rows, shape.latent_row_stride,
                                  shape.heads, kLatentDim, mode);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = MakeLayout(&descriptors->d, kValueDim, shape.rows, kValueDim, shape.heads,
                                  int64_t{kValueDim} * shape.rows, mode);
      !s.ok()) {
    return s;
  }

  cublasLtMatmulPreference_t preference = nullptr;
  MLA_RETURN_IF_CUBLAS_ERROR(cublasLtMatmulPreferenceCreate(&preference),
                             "cublasLtMatmulPreferenceCreate");
  // Operands may move to any 16-byte aligned address (pointer updates): no larger alignment.
  const uint32_t alignment = 16;
  cublasStatus_t status =
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof(workspace_bytes));
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment,
                                                    sizeof(alignment));
    }
  }
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = cublasLtMatmulAlgoGetHeuristic(handle, descriptors->matmul, descriptors->a,
                                            descriptors->b, descriptors->d, descriptors->d,
                                            preference, 1, &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(preference);
  MLA_RETURN_IF_CUBLAS_ERROR(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found > 0 && faults.bmm_finds_no_algorithm && faults.bmm_finds_no_algorithm()) found = 0;
  if (found == 0) {
    return absl::NotFoundError(absl::StrCat(
        "cuBLASLt found no algorithm for the W_UV batched GEMM: heads = ", shape.heads,
        ", rows = ", shape.rows, ", latent_row_stride = ", shape.latent_row_stride,
        ", w_row_stride = ", shape.w_row_stride, ", workspace = ", workspace_bytes, " bytes, ",
        mode == BmmBatchMode::kStrided ? "strided" : "pointer-array", " batch"));
  }
  descriptors->algo = result.algo;
  return ValueBmm(shape, mode, handle, std::move(descriptors), workspace_bytes);
}

ValueBmm::ValueBmm(ValueBmmShape shape, BmmBatchMode mode, cublasLtHandle_t handle,
                   std::shared_ptr<Descriptors> descriptors, size_t workspace_bytes)
    : shape_(shape),
      mode_(mode),
      handle_(handle),
      descriptors_(std::move(descriptors)),
      workspace_bytes_(workspace_bytes) {}

absl::Status ValueBmm::Run(const void* a, const void* b, void* d, void* workspace,
                           cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  const Descriptors& x = *descriptors_;
  return CublasStatus(cublasLtMatmul(handle_, x.matmul, &alpha, a, x.a, b, x.b, &beta, d, x.d, d,
                                     x.d, &x.algo, workspace, workspace_bytes_, stream),
                      "cublasLtMatmul");
}

absl::Status ValueBmm::RunStrided(const bf16* latent, const bf16* w_uv, bf16* values,
                                  void* workspace, cudaStream_t stream) const {
  if (mode_ != BmmBatchMode::kStrided) {
    return absl::FailedPreconditionError("RunStrided on a pointer-array plan");
  }
  return Run(w_uv, latent, values, workspace, stream);
}

absl::Status ValueBmm::RunPointerArray(const void* const* w_uv_table,
                                       const void* const* latent_table, void* const* values_table,
                                       void* workspace, cudaStream_t stream) const {
  if (mode_ != BmmBatchMode::kPointerArray) {
    return absl::FailedPreconditionError("RunPointerArray on a strided plan");
  }
  return Run(w_uv_table, latent_table, const_cast<void*>(static_cast<const void*>(values_table)),
             workspace, stream);
}

}  // namespace mla_tail::internal

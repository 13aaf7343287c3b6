#include "bench/peer.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/peer_gate.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/value_bmm.h"

namespace mla_tail_bench {

using mla_tail::kLatentDim;
using mla_tail::kValueDim;
using mla_tail::internal::CublasStatus;

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // as the library's BMM path

// `heads` matrices of rows x cols (column-major, leading dimension ld), `batch_stride` apart.
absl::Status StridedLayout(cublasLtMatrixLayout_t* layout, uint64_t rows, uint64_t cols, int64_t ld,
                           int heads, int64_t batch_stride) {
  MLA_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(layout, CUDA_R_16BF, rows, cols, ld),
                                   "cublasLtMatrixLayoutCreate"));
  const int32_t count = heads;
  MLA_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                    &count, sizeof(count)),
                   "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
  return CublasStatus(
      cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                       &batch_stride, sizeof(batch_stride)),
      "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

}  // namespace

// values[h] (128 x B, ld 128) = W_UV[h]^T (W_UV[h]: 512 x 128, ld 512) . latent[:, h, :]
// (512 x B, ld H * 512), in cuBLASLt's column-major terms; compact tensors.
struct Peer::Gemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};

  ~Gemm() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (matmul != nullptr) cublasLtMatmulDescDestroy(matmul);
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  absl::Status Plan(const mla_tail::TailShape& shape) {
    MLA_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&handle), "cublasLtCreate"));
    MLA_RETURN_IF_ERROR(
        CublasStatus(cublasLtMatmulDescCreate(&matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                     "cublasLtMatmulDescCreate"));
    const cublasOperation_t transpose = CUBLAS_OP_T;
    MLA_RETURN_IF_ERROR(
        CublasStatus(cublasLtMatmulDescSetAttribute(matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                    sizeof(transpose)),
                     "cublasLtMatmulDescSetAttribute(TRANSA)"));
    MLA_RETURN_IF_ERROR(StridedLayout(&a, kLatentDim, kValueDim, kLatentDim, shape.heads,
                                      int64_t{kValueDim} * kLatentDim));
    MLA_RETURN_IF_ERROR(StridedLayout(&b, kLatentDim, shape.rows, int64_t{shape.heads} * kLatentDim,
                                      shape.heads, kLatentDim));
    MLA_RETURN_IF_ERROR(StridedLayout(&d, kValueDim, shape.rows, kValueDim, shape.heads,
                                      int64_t{kValueDim} * shape.rows));
    cublasLtMatmulPreference_t preference = nullptr;
    MLA_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(&preference),
                                     "cublasLtMatmulPreferenceCreate"));
    size_t workspace = kWorkspaceBytes;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatmulAlgoGetHeuristic(handle, matmul, a, b, d, d, preference, 1, &result,
                                              &found);
    }
    cublasLtMatmulPreferenceDestroy(preference);
    MLA_RETURN_IF_ERROR(CublasStatus(status, "cublasLtMatmulAlgoGetHeuristic"));
    if (found == 0) {
      return absl::NotFoundError(absl::StrCat("cuBLASLt found no strided batched GEMM for heads = ",
                                              shape.heads, ", rows = ", shape.rows));
    }
    algo = result.algo;
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<Peer>> Peer::Create(const mla_tail::TailShape& shape) {
  std::unique_ptr<Peer> peer(new Peer());
  peer->shape_ = shape;
  peer->gemm_ = std::make_unique<Gemm>();
  MLA_RETURN_IF_ERROR(peer->gemm_->Plan(shape));
  absl::StatusOr<mla_tail_testing::DeviceMemory> workspace =
      mla_tail_testing::DeviceMemory::Allocate(kWorkspaceBytes);
  if (!workspace.ok()) return workspace.status();
  peer->workspace_ = *std::move(workspace);
  absl::StatusOr<mla_tail_testing::DeviceMemory> values = mla_tail_testing::DeviceMemory::Allocate(
      sizeof(mla_tail::bf16) * shape.heads * shape.rows * kValueDim);
  if (!values.ok()) return values.status();
  peer->values_ = *std::move(values);
  return peer;
}

Peer::~Peer() = default;

absl::Status Peer::Run(const mla_tail::TailBuffers& buffers, cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  const Gemm& g = *gemm_;
  void* values = values_.get();
  MLA_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmul(g.handle, g.matmul, &alpha, buffers.w_uv, g.a, buffers.latent, g.b, &beta,
                     values, g.d, values, g.d, &g.algo, workspace_.get(), kWorkspaceBytes, stream),
      "cublasLtMatmul"));
  return mla_tail::internal::CudaStatus(
      LaunchPeerGate(static_cast<const mla_tail::bf16*>(values), shape_, buffers, stream),
      "PeerGateKernel launch");
}

}  // namespace mla_tail_bench

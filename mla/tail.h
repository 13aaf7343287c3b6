#ifndef MLA_TAIL_H_
#define MLA_TAIL_H_

// MlaTail: the eager MLA attention tail on one device. Run() validates every argument, then
// launches a fused kernel or the batched GEMM + gate (mla::DispatchTail decides, or the
// caller), each launch carrying the programmatic-dependent-launch attribute.
//
// Thread safety: an MlaTail owns the BMM path's scratch (values, operand tables, workspace).
// Calls that could overlap on the GPU (from several threads, or on unordered streams) need
// separate instances. Run() is capturable: graph/ captures it into CUDA graphs.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla/fault_hooks.h"
#include "mla/kernels/params.h"
#include "mla/tail_args.h"
#include "mla/value_bmm.h"

namespace mla {

enum class TailPath {
  kAuto,   // the measured rule decides (mla/dispatch.h)
  kFused,  // a fused kernel: MlaValue or MlaValueWgmma (fused_variant, or the rule)
  kBmm,    // cuBLASLt batched GEMM + MlaGate
};

const char* TailPathName(TailPath path);

struct TailOptions {
  // The BMM path's scratch: its values [max_heads, max_rows, 128] and the cuBLASLt workspace
  // (64 MiB with the defaults). Without it Run() refuses TailPath::kBmm (FailedPrecondition) and
  // nothing is allocated for that path; the fused path needs no scratch. The measured rule
  // (kAuto) picks the fused path at every shape today.
  bool bmm = true;
  int max_heads = kMaxHeads;  // capacity of the BMM path's scratch
  int max_rows = 1024;
  size_t workspace_bytes = size_t{32} << 20;  // cuBLASLt workspace (32 MiB suits Hopper)
  bool pdl = true;  // launch with programmatic stream serialization
  MlaValueVariant fused_variant = MlaValueVariant::kAuto;  // the fused path's kernel
  FaultHooks faults;  // fault injection for tests; empty in production
};

class MlaTail {
 public:
  // Allocates the scratch on `device` and prepares the fused kernels there (outside any capture,
  // so that Run() may be captured). FailedPrecondition without a usable sm_90 device;
  // InvalidArgument for options out of range; ResourceExhausted when memory is short.
  static absl::StatusOr<std::unique_ptr<MlaTail>> Create(int device, const TailOptions& options);
  ~MlaTail();
  MlaTail(const MlaTail&) = delete;
  MlaTail& operator=(const MlaTail&) = delete;

  // Validates, then enqueues the tail on `stream` (a stream of this instance's device, or 0 for
  // the legacy default stream). When validation fails nothing is launched and nothing written.
  // The BMM path needs its scratch (TailOptions::bmm; FailedPrecondition otherwise), rows <=
  // max_rows and heads <= max_heads (OutOfRange otherwise).
  absl::Status Run(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                   TailPath path = TailPath::kAuto);

  // Plans the BMM GEMM for this shape now (outside any capture); Run() does so on first use.
  absl::Status PrepareBmm(const TailShape& shape, const TailBuffers& buffers);

  // The path Run() takes for `shape` under `path`.
  static TailPath Resolve(TailPath path, const TailShape& shape);

  // OK when `stream` may carry this instance's work: the legacy or per-thread default stream,
  // or a stream of this instance's device (not checked while the stream is capturing, where CUDA
  // refuses the query).
  absl::Status CheckStream(cudaStream_t stream) const;

  int device() const { return device_; }
  const TailOptions& options() const { return options_; }
  // Device memory this instance allocated: the BMM path's scratch (0 without it).
  size_t scratch_bytes() const { return scratch_bytes_; }

 private:
  MlaTail(int device, const TailOptions& options) : device_(device), options_(options) {}
  absl::StatusOr<const ValueBmm*> Plan(const TailShape& shape, const TailBuffers& buffers);
  absl::Status RunFused(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream);
  absl::Status RunBmm(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream);

  int device_;
  TailOptions options_;
  size_t scratch_bytes_ = 0;
  cublasLtHandle_t cublaslt_ = nullptr;
  void* workspace_ = nullptr;
  bf16* values_ = nullptr;        // [max_heads, max_rows, 128]
  void* operand_tables_ = nullptr;  // kOperandTableBytes: BmmPointersKernel's output

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
  absl::flat_hash_map<PlanKey, ValueBmm> plans_;
};

}  // namespace mla

#endif  // MLA_TAIL_H_

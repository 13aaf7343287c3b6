#ifndef MLA_TAIL_BENCH_PEER_H_
#define MLA_TAIL_BENCH_PEER_H_

// The unfused formulation serving engines use, done well, as tail_bench's `peer`: a strided
// cuBLASLt batched GEMM (a batch entry per head) of the layer's latent and W_UV into values
// [H, B, 128], then a plain gate kernel (peer_gate.cu) launched with PDL. The layers share one
// values buffer, as a runtime's memory pool reuses the intermediate: each gate kernel reads what
// its own GEMM has just written, and the next GEMM (launched without PDL) starts after it.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/problem.h"

namespace mla_tail_bench {

class Peer {
 public:
  // Plans the GEMM for `shape` over compact tensors (mla_tail::CompactBuffers, as MakeLayers
  // makes them) and allocates the values buffer the layers share.
  static absl::StatusOr<std::unique_ptr<Peer>> Create(const mla_tail::TailShape& shape);
  ~Peer();
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;

  // Enqueues a layer's tail over `buffers` (compact, of the planned shape) on `stream`.
  absl::Status Run(const mla_tail::TailBuffers& buffers, cudaStream_t stream) const;

 private:
  struct Gemm;
  Peer() = default;

  mla_tail::TailShape shape_;
  std::unique_ptr<Gemm> gemm_;
  mla_tail_testing::DeviceMemory values_;  // [H, B, 128]
  mla_tail_testing::DeviceMemory workspace_;
};

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_PEER_H_

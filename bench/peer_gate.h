#ifndef MLA_TAIL_BENCH_PEER_GATE_H_
#define MLA_TAIL_BENCH_PEER_GATE_H_

#include <cuda_runtime_api.h>

#include "mla_tail/mla/tail_args.h"

namespace mla_tail_bench {

// The peer's gate (bench/peer.h): output = active ? bf16(values * sigmoid(gate)) : +0 for the
// GEMM's values [H, B, 128], launched with PDL (it waits for the GEMM before it reads anything).
cudaError_t LaunchPeerGate(const mla_tail::bf16* values, const mla_tail::TailShape& shape,
                           const mla_tail::TailBuffers& buffers, cudaStream_t stream);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_PEER_GATE_H_

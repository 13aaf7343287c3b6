#ifndef MLA_TAIL_BENCH_LIMIT_KERNELS_H_
#define MLA_TAIL_BENCH_LIMIT_KERNELS_H_

// Kernels that measure the limits the tail is held against.

#include <cuda_runtime_api.h>

#include <cstddef>

namespace mla_tail_bench {

// An empty kernel of `blocks` blocks (with PDL wait and trigger): the launch floor of a graph node.
cudaError_t LaunchFloorKernel(int blocks, cudaStream_t stream, bool pdl);

// dst = src, 16 bytes a thread, over all multiprocessors: the copy bandwidth the SMs reach.
cudaError_t LaunchCopyKernel(const void* src, void* dst, size_t bytes, cudaStream_t stream);

// A stand-in for the kernel before the tail (attention): `blocks` blocks busy for `busy_ns`, then
// launch_dependents, then an epilogue of `epilogue_ns` during which a PDL dependent may start.
// Its blocks hold `smem_bytes` of dynamic shared memory (attention kernels hold much of it), and
// at the start of the epilogue they rewrite `output_bytes` at `output` with the values it holds
// (a multiple of 16 bytes; null for none), as attention writes the tail's latent: it is then in
// L2 when the tail reads it.
cudaError_t LaunchUpstreamKernel(int blocks, unsigned busy_ns, unsigned epilogue_ns,
                                 size_t smem_bytes, void* output, size_t output_bytes,
                                 cudaStream_t stream, bool pdl);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_LIMIT_KERNELS_H_

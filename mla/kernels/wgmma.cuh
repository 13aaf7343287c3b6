#ifndef MLA_TAIL_MLA_KERNELS_WGMMA_CUH_
#define MLA_TAIL_MLA_KERNELS_WGMMA_CUH_

// Hopper warpgroup MMA from shared memory, for the kernels that stage both operands in the
// canonical K-major 128-byte swizzle: row r of a tile is 128 bytes at r * 128, its 16-byte word w
// stored at word w ^ (r % 8); tiles start on 1024-byte boundaries, 8-row groups 1024 bytes apart.

#include <cuda_runtime.h>

#include <cstdint>

namespace mla_tail::internal::device {

// The shared-memory matrix descriptor of wgmma for a K-major operand in the 128-byte swizzle:
// start address, leading offset 16 bytes (unused by this layout), stride 1024 bytes between
// 8-row groups, layout type 1 (128-byte swizzle).
__device__ __forceinline__ uint64_t SmemDescriptor(uint32_t smem_address) {
  return static_cast<uint64_t>((smem_address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most kPending of this warpgroup's committed MMA groups are still running.
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// cp.async writes shared memory through the generic proxy, wgmma reads it through the async
// proxy: each writer fences after its copies land, before the barrier that publishes them.
__device__ __forceinline__ void FenceProxyAsyncShared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Keeps the compiler from moving accumulator reads or writes across the asynchronous MMAs.
template <int kN>
__device__ __forceinline__ void FenceAccumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Warp-specialized kernels: a warpgroup gives registers back to the block's pool, or takes
// them from it, leaving it kRegisters a thread (a multiple of 8, 24-256). All its threads call.
template <int kRegisters>
__device__ __forceinline__ void WarpgroupRegistersDown() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void WarpgroupRegistersUp() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

#define MLA_WG_D8(i)                                                                              \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])

// D[64 x N] += A[64 x 16] * B[N x 16]^T for N = 16, 32, 64 or 128 (the accumulators' count / 2),
// both K-major in shared memory; fp32 accumulators.
__device__ __forceinline__ void Wgmma64xN(float (&d)[8], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, "
      "%8, %9, p, 1, 1, 0, 0;\n}"
      : MLA_WG_D8(0)
      : "l"(a), "l"(b), "r"(1));
}
__device__ __forceinline__ void Wgmma64xN(float (&d)[16], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, 0, 0;\n}"
      : MLA_WG_D8(0), MLA_WG_D8(8)
      : "l"(a), "l"(b), "r"(1));
}
__device__ __forceinline__ void Wgmma64xN(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}"
      : MLA_WG_D8(0), MLA_WG_D8(8), MLA_WG_D8(16), MLA_WG_D8(24)
      : "l"(a), "l"(b), "r"(1));
}
__device__ __forceinline__ void Wgmma64xN(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}"
      : MLA_WG_D8(0), MLA_WG_D8(8), MLA_WG_D8(16), MLA_WG_D8(24), MLA_WG_D8(32), MLA_WG_D8(40),
        MLA_WG_D8(48), MLA_WG_D8(56)
      : "l"(a), "l"(b), "r"(1));
}

#undef MLA_WG_D8

}  // namespace mla_tail::internal::device

#endif  // MLA_TAIL_MLA_KERNELS_WGMMA_CUH_

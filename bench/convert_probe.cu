// convert_probe: how many values a multiprocessor converts a clock, for the instructions that
// e4m3 -> bf16 dequantization can be built from and for two whole forms of it:
//   - library: device::DequantizeE4m3x8 (mla/kernels/fp8.cuh), bf16(float(w) * s): e4m3 -> f16x2,
//     f16 -> f32, one FP32 multiply each, the pair rounded to bf16x2;
//   - integer: the exact bf16 value of w without a scale, built with byte permutes and an
//     integer multiply-add (w · 2^-120 as bf16 bits), then one bf16x2 multiply by 2^120. It is
//     what a contract that scales partial sums per K block would need; NaN encodings are not
//     kept (0x7F converts to 480), so it is a lower bound on that form's cost.
// Each thread runs 8 independent chains of one operation for 4096 iterations (a form: 4 chains of
// 8 values, each folded back into its input with one XOR); blocks of 128 threads, 1, 2 or 8 a
// multiprocessor, all resident at once. The rate is lane results (values) a multiprocessor a
// clock: threads x iterations x results an iteration over the slowest block's clock64() cycles.
// Prints CSV.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "bench/convert_probe.h"
#include "bench/cuda_check.h"
#include "mla/kernels/fp8.cuh"

namespace mla_tail_bench {
namespace {

constexpr int kThreads = 128;
constexpr int kIterations = 4096;
constexpr int kChains = 8;

enum class Op {
  kCvtE4m3x2ToF16x2,
  kCvtF16ToF32,
  kCvtF32x2ToBf16x2,
  kPrmt,
  kLop3,
  kImad,
  kFmul,
  kMulBf16x2,
  kMaxBf16x2,
  kLibraryDequantize,
  kIntegerDequantize,
};

struct Form {
  Op op;
  const char* name;
  int results;  // lane results an iteration of a thread
};

constexpr Form kForms[] = {
    {Op::kCvtE4m3x2ToF16x2, "cvt.rn.f16x2.e4m3x2", 2 * kChains},
    {Op::kCvtF16ToF32, "cvt.f32.f16", kChains},
    {Op::kCvtF32x2ToBf16x2, "cvt.rn.bf16x2.f32", 2 * kChains},
    {Op::kPrmt, "prmt.b32", kChains},
    {Op::kLop3, "lop3.b32", kChains},
    {Op::kImad, "mad.lo.u32", kChains},
    {Op::kFmul, "mul.rn.f32", kChains},
    {Op::kMulBf16x2, "mul.rn.bf16x2", 2 * kChains},
    {Op::kMaxBf16x2, "max.bf16x2", 2 * kChains},
    {Op::kLibraryDequantize, "dequantize: library", 4 * kChains},
    {Op::kIntegerDequantize, "dequantize: integer", 4 * kChains},
};

// Four e4m3 (the low byte first) as two bf16x2 words, w · 2^-120 in bf16 bits then times 2^120.
__device__ __forceinline__ void IntegerDequantize4(uint32_t w, uint32_t& lo, uint32_t& hi) {
  const uint32_t magnitudes = w & 0x7f7f7f7fu;
  const uint32_t signs = w & 0x80808080u;
  uint32_t m0, m1, s0, s1;
  asm("prmt.b32 %0, %1, 0, 0x4140;" : "=r"(m0) : "r"(magnitudes));  // bytes 0, 1 at bits 0, 16
  asm("prmt.b32 %0, %1, 0, 0x4342;" : "=r"(m1) : "r"(magnitudes));  // bytes 2, 3
  asm("prmt.b32 %0, %1, 0, 0x1404;" : "=r"(s0) : "r"(signs));       // signs at bits 15, 31
  asm("prmt.b32 %0, %1, 0, 0x3424;" : "=r"(s1) : "r"(signs));
  const uint32_t scaled0 = m0 * 16 + s0;
  const uint32_t scaled1 = m1 * 16 + s1;
  constexpr uint32_t kTwoTo120 = 0x7b807b80u;  // bf16 2^120, twice
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(lo) : "r"(scaled0), "r"(kTwoTo120));
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(hi) : "r"(scaled1), "r"(kTwoTo120));
}

// multiplier: a kernel argument (17), so that the compiler cannot fold a chain of multiply-adds.
template <Op kOp>
__device__ __forceinline__ uint32_t Step(uint32_t x, uint32_t multiplier) {
  uint32_t r = x;
  if constexpr (kOp == Op::kCvtE4m3x2ToF16x2) {
    asm volatile("{.reg .b16 t;\nmov.b32 {t, _}, %1;\ncvt.rn.f16x2.e4m3x2 %0, t;}"
                 : "=r"(r)
                 : "r"(x));
  } else if constexpr (kOp == Op::kCvtF16ToF32) {
    float f;
    asm volatile("{.reg .b16 t;\nmov.b32 {t, _}, %1;\ncvt.f32.f16 %0, t;}" : "=f"(f) : "r"(x));
    r = __float_as_uint(f);
  } else if constexpr (kOp == Op::kCvtF32x2ToBf16x2) {
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
  } else if constexpr (kOp == Op::kPrmt) {
    asm volatile("prmt.b32 %0, %1, 0x5a5a5a5a, 0x1404;" : "=r"(r) : "r"(x));
  } else if constexpr (kOp == Op::kLop3) {
    asm volatile("lop3.b32 %0, %1, 0x0f0f0f0f, 0x12345678, 0x96;" : "=r"(r) : "r"(x));
  } else if constexpr (kOp == Op::kImad) {
    asm volatile("mad.lo.u32 %0, %1, %2, 0x1234;" : "=r"(r) : "r"(x), "r"(multiplier));
  } else if constexpr (kOp == Op::kFmul) {
    float f;
    asm volatile("mul.rn.f32 %0, %1, 0f3F800001;" : "=f"(f) : "f"(__uint_as_float(x)));
    r = __float_as_uint(f);
  } else if constexpr (kOp == Op::kMulBf16x2) {
    asm volatile("mul.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(0x3f813f81u));
  } else if constexpr (kOp == Op::kMaxBf16x2) {
    asm volatile("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(0x3f803f80u));
  }
  return r;
}

template <Op kOp>
__global__ void __launch_bounds__(kThreads)
    ConvertKernel(uint32_t* sink, long long* cycles, float scale, uint32_t multiplier) {
  uint32_t r[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i) r[i] = threadIdx.x * 0x01010101u + i * 0x3c3c3c3cu + blockIdx.x;
  __syncthreads();
  const long long start = clock64();
  for (int it = 0; it < kIterations; ++it) {
    if constexpr (kOp == Op::kLibraryDequantize || kOp == Op::kIntegerDequantize) {
#pragma unroll
      for (int i = 0; i < kChains; i += 2) {
        uint4 d;
        if constexpr (kOp == Op::kLibraryDequantize) {
          d = mla_tail::internal::device::DequantizeE4m3x8(make_uint2(r[i], r[i + 1]), scale);
        } else {
          IntegerDequantize4(r[i], d.x, d.y);
          IntegerDequantize4(r[i + 1], d.z, d.w);
        }
        r[i] = d.x ^ d.y;
        r[i + 1] = d.z ^ d.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChains; ++i) r[i] = Step<kOp>(r[i], multiplier);
    }
  }
  const long long end = clock64();
  uint32_t folded = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i) folded ^= r[i];
  sink[blockIdx.x * kThreads + threadIdx.x] = folded;
  if (threadIdx.x == 0) cycles[blockIdx.x] = end - start;
}

template <Op kOp>
double ValuesPerClock(const Form& form, int blocks_per_sm, int sms, uint32_t* sink,
                      long long* cycles) {
  const int blocks = blocks_per_sm * sms;
  for (int launch = 0; launch < 2; ++launch) {  // the first warms up
    ConvertKernel<kOp><<<blocks, kThreads>>>(sink, cycles, 1.37f, 17u);
    CUDA_CHECK(cudaGetLastError());
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<long long> host(blocks);
  CUDA_CHECK(cudaMemcpy(host.data(), cycles, sizeof(long long) * blocks, cudaMemcpyDeviceToHost));
  long long slowest = 1;
  for (const long long c : host) slowest = c > slowest ? c : slowest;
  return double(blocks_per_sm) * kThreads * kIterations * form.results / double(slowest);
}

template <size_t... kI>
void RunAll(int sms, uint32_t* sink, long long* cycles, std::index_sequence<kI...>) {
  for (const int blocks_per_sm : {1, 2, 8}) {
    (std::printf("%s,%d,%.1f\n", kForms[kI].name, blocks_per_sm * kThreads / 32,
                 ValuesPerClock<kForms[kI].op>(kForms[kI], blocks_per_sm, sms, sink, cycles)),
     ...);
    std::fflush(stdout);
  }
}

}  // namespace

int RunConvertProbe() {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint32_t* sink = nullptr;
  long long* cycles = nullptr;
  CUDA_CHECK(cudaMalloc(&sink, sizeof(uint32_t) * 8 * sms * kThreads));
  CUDA_CHECK(cudaMalloc(&cycles, sizeof(long long) * 8 * sms));
  std::printf("form,warps_per_sm,values_per_sm_per_clock\n");
  RunAll(sms, sink, cycles, std::make_index_sequence<sizeof(kForms) / sizeof(kForms[0])>());
  CUDA_CHECK(cudaFree(sink));
  CUDA_CHECK(cudaFree(cycles));
  return 0;
}

}  // namespace mla_tail_bench

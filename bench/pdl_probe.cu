// pdl_probe: when does a PDL-launched kernel start, and when does its griddepcontrol.wait
// return, relative to its upstream kernel's launch_dependents and end? Stamped with %globaltimer
// inside the kernels, in a stream and in a captured graph, with the dependent launched with and
// without PDL. This is the mechanism the tail's W_UV copies before the dependency wait rely on.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cuda_check.h"
#include "bench/median.h"
#include "bench/pdl_probe.h"
#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.h"

namespace mla_tail_bench {
namespace {

struct Stamps {  // globaltimer ns, one set per upstream/dependent pair
  unsigned long long trigger_last, upstream_end_last;
  unsigned long long start_first, start_last, release_first, release_last, end_last;
};

__device__ __forceinline__ unsigned long long Now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ void SpinUntil(unsigned long long end) {
  while (Now() < end) {
  }
}

struct UpstreamArgs {
  Stamps* stamps;
  unsigned busy_ns, epilogue_ns;
  int* flag;  // written at the end: what the dependent reads after its wait
};

__global__ void ProbeUpstream(const UpstreamArgs a) {
  mla_tail::internal::device::GridDependencyWait();
  const unsigned long long start = Now();
  SpinUntil(start + a.busy_ns);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(&a.stamps->trigger_last, Now());
  mla_tail::internal::device::LaunchDependents();
  SpinUntil(Now() + a.epilogue_ns);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) *a.flag = 1;
    atomicMax(&a.stamps->upstream_end_last, Now());
  }
}

struct DependentArgs {
  Stamps* stamps;
  const uint4* weights;  // read before the wait, as the tail reads W_UV
  int prefetch_words;    // per thread
  const int* flag;
  int* sink;
};

__global__ void ProbeDependent(const DependentArgs a) {
  const unsigned long long start = Now();
  uint4 acc = {0, 0, 0, 0};
  const uint4* w = a.weights + (size_t(blockIdx.x) * blockDim.x + threadIdx.x);
  for (int i = 0; i < a.prefetch_words; ++i) {
    const uint4 v =
        mla_tail::internal::device::LoadWeight16(w + size_t(i) * gridDim.x * blockDim.x);
    acc.x ^= v.x;
  }
  mla_tail::internal::device::GridDependencyWait();
  const unsigned long long released = Now();
  const int flag = *a.flag;
  mla_tail::internal::device::LaunchDependents();
  if (threadIdx.x == 0) {
    atomicMin(&a.stamps->start_first, start);
    atomicMax(&a.stamps->start_last, start);
    atomicMin(&a.stamps->release_first, released);
    atomicMax(&a.stamps->release_last, released);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (acc.x == 0x12345678u || flag != 1) atomicAdd(a.sink, 1);  // flag != 1: a broken wait
    atomicMax(&a.stamps->end_last, Now());
  }
}

__global__ void TimerResolution(unsigned long long* out) {
  unsigned long long last = Now(), smallest = ~0ull, changes = 0;
  const unsigned long long begin = last;
  for (int i = 0; i < 100000; ++i) {
    const unsigned long long t = Now();
    if (t != last) {
      smallest = min(smallest, t - last);
      ++changes;
      last = t;
    }
  }
  out[0] = smallest;
  out[1] = changes > 0 ? (last - begin) / changes : 0;
}

}  // namespace

int RunPdlProbe(const PdlProbeOptions& o) {
  unsigned long long* resolution = nullptr;
  CUDA_CHECK(cudaMalloc(&resolution, 2 * sizeof(unsigned long long)));
  TimerResolution<<<1, 1>>>(resolution);
  unsigned long long res[2];
  CUDA_CHECK(cudaMemcpy(res, resolution, sizeof(res), cudaMemcpyDeviceToHost));
  std::printf("# globaltimer: smallest step %llu ns, mean step %llu ns\n", res[0], res[1]);
  cudaFree(resolution);

  CUDA_CHECK(cudaFuncSetAttribute(
      ProbeUpstream, cudaFuncAttributeMaxDynamicSharedMemorySize,
      *std::max_element(o.upstream_smem_bytes.begin(), o.upstream_smem_bytes.end())));
  CUDA_CHECK(cudaFuncSetAttribute(
      ProbeDependent, cudaFuncAttributeMaxDynamicSharedMemorySize,
      *std::max_element(o.dependent_smem_bytes.begin(), o.dependent_smem_bytes.end())));
  const int pairs = o.pairs;
  Stamps* stamps = nullptr;
  int *flags = nullptr, *sink = nullptr;
  uint4* weights = nullptr;
  const size_t weight_words = size_t{1} << 22;  // 64 MB: cold for every pair
  CUDA_CHECK(cudaMalloc(&stamps, pairs * sizeof(Stamps)));
  CUDA_CHECK(cudaMalloc(&flags, pairs * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
  CUDA_CHECK(cudaMalloc(&weights, weight_words * sizeof(uint4)));
  CUDA_CHECK(cudaMemset(weights, 0, weight_words * sizeof(uint4)));
  CUDA_CHECK(cudaMemset(sink, 0, sizeof(int)));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::printf(
      "where,dependent_pdl,epilogue_ns,dependent_blocks,prefetch_words,upstream_smem,"
      "dependent_smem,"
      "start_after_trigger_us,release_after_upstream_end_us,end_after_upstream_end_us,"
      "first_to_last_start_us,pair_us\n");
  for (const bool graph : {false, true}) {
    for (const bool pdl : {false, true}) {
      for (const int epilogue : o.epilogues_ns) {
        for (const int blocks : o.dependent_blocks) {
          for (const int prefetch : o.prefetch_words) {
            for (const int upstream_smem : o.upstream_smem_bytes) {
              for (const int dependent_smem : o.dependent_smem_bytes) {
                std::vector<Stamps> init(pairs, Stamps{0, 0, ~0ull, 0, ~0ull, 0, 0});
                CUDA_CHECK(cudaMemcpy(stamps, init.data(), pairs * sizeof(Stamps),
                                      cudaMemcpyHostToDevice));
                CUDA_CHECK(cudaMemset(flags, 0, pairs * sizeof(int)));
                const int stride = int(weight_words / (size_t(blocks) * 128));
                const int words = std::min(prefetch, stride);
                auto enqueue = [&](cudaStream_t s) -> cudaError_t {
                  for (int i = 0; i < pairs; ++i) {
                    cudaError_t e = mla_tail::internal::LaunchWithPdl(
                        ProbeUpstream, dim3(o.upstream_blocks), dim3(128), upstream_smem, s,
                        /*pdl=*/false,
                        UpstreamArgs{stamps + i, unsigned(o.busy_ns), unsigned(epilogue),
                                     flags + i});
                    if (e != cudaSuccess) return e;
                    e = mla_tail::internal::LaunchWithPdl(
                        ProbeDependent, dim3(blocks), dim3(128), dependent_smem, s, pdl,
                        DependentArgs{stamps + i, weights, words, flags + i, sink});
                    if (e != cudaSuccess) return e;
                  }
                  return cudaSuccess;
                };
                cudaEvent_t begin, end;
                cudaEventCreate(&begin);
                cudaEventCreate(&end);
                if (graph) {
                  cudaGraph_t g;
                  cudaGraphExec_t exec;
                  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
                  CUDA_CHECK(enqueue(stream));
                  CUDA_CHECK(cudaStreamEndCapture(stream, &g));
                  CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
                  CUDA_CHECK(cudaGraphUpload(exec, stream));
                  CUDA_CHECK(cudaEventRecord(begin, stream));
                  CUDA_CHECK(cudaGraphLaunch(exec, stream));
                  CUDA_CHECK(cudaEventRecord(end, stream));
                  CUDA_CHECK(cudaStreamSynchronize(stream));
                  cudaGraphExecDestroy(exec);
                  cudaGraphDestroy(g);
                } else {
                  CUDA_CHECK(cudaEventRecord(begin, stream));
                  CUDA_CHECK(enqueue(stream));
                  CUDA_CHECK(cudaEventRecord(end, stream));
                  CUDA_CHECK(cudaStreamSynchronize(stream));
                }
                float ms = 0;
                cudaEventElapsedTime(&ms, begin, end);
                cudaEventDestroy(begin);
                cudaEventDestroy(end);
                std::vector<Stamps> got(pairs);
                CUDA_CHECK(
                    cudaMemcpy(got.data(), stamps, pairs * sizeof(Stamps), cudaMemcpyDeviceToHost));
                std::vector<double> start, release, finish, spread;
                for (int i = pairs / 4; i < pairs; ++i) {  // past the warm-up
                  const Stamps& t = got[i];
                  start.push_back((double(t.start_first) - double(t.trigger_last)) / 1000);
                  release.push_back((double(t.release_last) - double(t.upstream_end_last)) / 1000);
                  finish.push_back((double(t.end_last) - double(t.upstream_end_last)) / 1000);
                  spread.push_back((double(t.start_last) - double(t.start_first)) / 1000);
                }
                std::printf("%s,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                            graph ? "graph" : "stream", pdl ? 1 : 0, epilogue, blocks, words,
                            upstream_smem, dependent_smem, Median(start), Median(release),
                            Median(finish), Median(spread), 1000.0 * ms / pairs);
              }
            }
          }
        }
      }
    }
  }
  int broken = 0;
  CUDA_CHECK(cudaMemcpy(&broken, sink, sizeof(int), cudaMemcpyDeviceToHost));
  std::printf("# dependents that saw the upstream flag unset after their wait: %d\n", broken);
  cudaStreamDestroy(stream);
  cudaFree(stamps);
  cudaFree(flags);
  cudaFree(sink);
  cudaFree(weights);
  return broken == 0 ? 0 : 1;
}

}  // namespace mla_tail_bench

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/median.h"
#include "bench/stream_floor.h"
#include "bench/stream_hold.h"

namespace mla_tail_bench {
namespace {

constexpr int64_t kLayerAlign = 256;  // bytes between layers' buffers, at least

__device__ unsigned g_stream_sink;  // written only if the xor of all words is a magic value

struct StreamReadParams {
  const uint4* src;
  int64_t words;
};

__device__ __forceinline__ uint4 LoadStreaming(const uint4* pointer) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(pointer));
  return v;
}

template <int kThreads, int kLoads>
__global__ void __launch_bounds__(kThreads) StreamReadKernel(const StreamReadParams p) {
  constexpr int64_t kWordsPerBlockPass = int64_t{kThreads} * kLoads;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  unsigned acc = 0;
  const int64_t pass = int64_t{gridDim.x} * kWordsPerBlockPass;
#pragma unroll 1
  for (int64_t base = blockIdx.x * kWordsPerBlockPass + threadIdx.x; base < p.words; base += pass) {
    uint4 v[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int64_t w = base + int64_t{i} * kThreads;
      v[i] = w < p.words ? LoadStreaming(p.src + w) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kLoads; ++i) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  }
  if (acc == 0x9e3779b9u) g_stream_sink = acc;
}

// The kernel of `shape` (one of kStreamReadShapes), or null.
const void* KernelOf(StreamReadShape shape) {
  if (shape.threads == 512 && shape.loads == 4) {
    return reinterpret_cast<const void*>(&StreamReadKernel<512, 4>);
  }
  if (shape.threads == 128 && shape.loads == 4) {
    return reinterpret_cast<const void*>(&StreamReadKernel<128, 4>);
  }
  if (shape.threads == 128 && shape.loads == 1) {
    return reinterpret_cast<const void*>(&StreamReadKernel<128, 1>);
  }
  return nullptr;
}

int64_t BlocksWithWork(int64_t bytes, StreamReadShape shape) {
  const int64_t words = (bytes + 15) / 16;
  const int64_t per_pass = int64_t{shape.threads} * shape.loads;
  return std::max<int64_t>(1, (words + per_pass - 1) / per_pass);
}

// Frees what MeasureStreamFloor holds however it returns; ends a capture left open.
struct Resources {
  cudaStream_t stream = nullptr;
  void* buffer = nullptr;
  bool capturing = false;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Resources() {
    if (capturing) {
      cudaGraph_t dropped = nullptr;
      cudaStreamEndCapture(stream, &dropped);
      if (dropped != nullptr) cudaGraphDestroy(dropped);
    }
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (buffer != nullptr) {
      cudaStreamSynchronize(stream);
      cudaFree(buffer);
    }
  }
};

#define STREAM_FLOOR_RETURN_IF_ERROR(call) \
  do {                                     \
    const cudaError_t e_ = (call);         \
    if (e_ != cudaSuccess) return e_;      \
  } while (0)

}  // namespace

cudaError_t LaunchStreamRead(const void* src, int64_t bytes, int blocks, cudaStream_t stream,
                             bool pdl, StreamReadShape shape) {
  const void* kernel = KernelOf(shape);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  cudaLaunchAttribute attributes[1];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(shape.threads);
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 1;
  StreamReadParams params{static_cast<const uint4*>(src), bytes / 16};
  void* arguments[] = {&params};
  return cudaLaunchKernelExC(&config, kernel, arguments);
}

cudaError_t MeasureStreamFloor(int64_t bytes, cudaStream_t stream, StreamFloor* floor,
                               const StreamFloorOptions& options) {
  if (bytes <= 0 || options.replays < 1 || options.min_layers < 1 ||
      options.max_layers < options.min_layers || options.max_blocks_per_sm < 1) {
    return cudaErrorInvalidValue;
  }
  int device = 0, sms = 0;
  STREAM_FLOOR_RETURN_IF_ERROR(cudaGetDevice(&device));
  STREAM_FLOOR_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t read_bytes = (bytes + 15) / 16 * 16;
  const int64_t stride = (read_bytes + kLayerAlign - 1) / kLayerAlign * kLayerAlign;
  const int layers = static_cast<int>(std::clamp<int64_t>(
      (options.cold_bytes + stride - 1) / stride, options.min_layers, options.max_layers));

  Resources r;
  r.stream = stream;
  STREAM_FLOOR_RETURN_IF_ERROR(cudaMalloc(&r.buffer, stride * layers));
  STREAM_FLOOR_RETURN_IF_ERROR(cudaMemsetAsync(r.buffer, 0x5a, stride * layers, stream));
  STREAM_FLOOR_RETURN_IF_ERROR(cudaEventCreate(&r.start));
  STREAM_FLOOR_RETURN_IF_ERROR(cudaEventCreate(&r.stop));

  StreamFloor result;
  result.layers = layers;
  StreamHold hold;
  for (const StreamReadShape& shape : kStreamReadShapes) {
    // Small blocks only where 512-thread ones leave multiprocessors idle or barely fill them.
    if (shape.threads < 512 && read_bytes > (int64_t{16} << 20)) continue;
    const int64_t useful_blocks = BlocksWithWork(read_bytes, shape);
    int64_t last_blocks = -1;
    for (int k = 1; k <= options.max_blocks_per_sm; ++k) {
      const int64_t blocks = std::min<int64_t>(int64_t{k} * sms, useful_blocks);
      if (blocks == last_blocks) continue;  // the same grid as k - 1: the same kernel
      last_blocks = blocks;
      STREAM_FLOOR_RETURN_IF_ERROR(
          cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      r.capturing = true;
      for (int l = 0; l < layers; ++l) {
        STREAM_FLOOR_RETURN_IF_ERROR(
            LaunchStreamRead(static_cast<const char*>(r.buffer) + l * stride, read_bytes,
                             static_cast<int>(blocks), stream, options.pdl, shape));
      }
      r.capturing = false;
      STREAM_FLOOR_RETURN_IF_ERROR(cudaStreamEndCapture(stream, &r.graph));
      STREAM_FLOOR_RETURN_IF_ERROR(cudaGraphInstantiate(&r.exec, r.graph, 0));
      STREAM_FLOOR_RETURN_IF_ERROR(cudaGraphUpload(r.exec, stream));
      STREAM_FLOOR_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      std::vector<float> ms;
      constexpr int kWarmup = 3;
      for (int i = 0; i < kWarmup + options.replays; ++i) {
        // Timed replays are held until the graph and the stop event are enqueued: the events
        // time the GPU alone. The warm-up replays run unheld.
        const bool held = i >= kWarmup;
        cudaError_t e = held ? hold.Hold(stream) : cudaSuccess;
        if (e == cudaSuccess) e = cudaEventRecord(r.start, stream);
        if (e == cudaSuccess) e = cudaGraphLaunch(r.exec, stream);
        if (e == cudaSuccess) e = cudaEventRecord(r.stop, stream);
        if (held) hold.Release();
        const cudaError_t drained = cudaStreamSynchronize(stream);
        STREAM_FLOOR_RETURN_IF_ERROR(e);
        STREAM_FLOOR_RETURN_IF_ERROR(drained);
        if (held && hold.TimedOut()) return cudaErrorTimeout;
        float t = 0;
        STREAM_FLOOR_RETURN_IF_ERROR(cudaEventElapsedTime(&t, r.start, r.stop));
        if (i >= kWarmup) ms.push_back(t);
      }
      STREAM_FLOOR_RETURN_IF_ERROR(cudaGraphExecDestroy(r.exec));
      r.exec = nullptr;
      STREAM_FLOOR_RETURN_IF_ERROR(cudaGraphDestroy(r.graph));
      r.graph = nullptr;
      const double us = 1000.0 * Median(ms) / layers;
      if (result.blocks == 0 || us < result.us) {
        result.us = us;
        result.shape = shape;
        result.blocks = static_cast<int>(blocks);
        result.blocks_per_sm = static_cast<double>(blocks) / sms;
      }
    }
  }
  *floor = result;
  return cudaSuccess;
}

}  // namespace mla_tail_bench

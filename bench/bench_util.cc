#include "bench/bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bench/limit_kernels.h"
#include "mla/cuda_status.h"
#include "testing/fill.h"

namespace mla_bench {

using mla::bf16;
using mla::kLatentDim;
using mla::kValueDim;
using mla_testing::DeviceMemory;

int64_t TailBytes(const mla::TailShape& s) {
  const int64_t h = s.heads, b = s.rows;
  return 2 * (h * kValueDim * kLatentDim + b * h * kLatentDim + 2 * b * h * kValueDim) +
         4 * (b / s.q);
}

int LayersForColdL2(const mla::TailShape& shape, int min_layers, int max_layers,
                    int64_t cold_bytes) {
  const int64_t per_layer = TailBytes(shape);
  const int64_t needed = (cold_bytes + per_layer - 1) / per_layer;
  return static_cast<int>(std::clamp<int64_t>(needed, min_layers, max_layers));
}

absl::StatusOr<std::vector<Layer>> MakeLayers(const mla::TailShape& shape, int count,
                                              cudaStream_t stream) {
  std::vector<Layer> layers(count);
  const int64_t h = shape.heads, b = shape.rows;
  for (int i = 0; i < count; ++i) {
    Layer& layer = layers[i];
    struct Alloc {
      DeviceMemory* memory;
      int64_t bytes;
    };
    for (const Alloc& a : {Alloc{&layer.latent, b * h * kLatentDim * 2},
                           Alloc{&layer.w_uv, h * kValueDim * kLatentDim * 2},
                           Alloc{&layer.gate, b * h * kValueDim * 2},
                           Alloc{&layer.lengths, (b / shape.q) * 4},
                           Alloc{&layer.output, b * h * kValueDim * 2}}) {
      MLA_RETURN_IF_ERROR(a.memory->Reset(a.bytes));
    }
    using mla_testing::Values;
    const uint64_t seed = 1000 + 4 * i;
    MLA_RETURN_IF_CUDA_ERROR(
        mla_testing::FillTestValues(
            {layer.latent.as<uint16_t>(), b, h, kLatentDim, h * kLatentDim, kLatentDim}, seed,
            Values::kUniform, stream),
        "fill latent");
    MLA_RETURN_IF_CUDA_ERROR(
        mla_testing::FillTestValues(
            {layer.w_uv.as<uint16_t>(), h, kValueDim, kLatentDim, kValueDim * kLatentDim,
             kLatentDim},
            seed + 1, Values::kUniform, stream),
        "fill w_uv");
    MLA_RETURN_IF_CUDA_ERROR(
        mla_testing::FillTestValues({layer.gate.as<uint16_t>(), b, 1, h * kValueDim,
                                     h * kValueDim, 0},
                                    seed + 2, Values::kUniformGates, stream),
        "fill gate");
    MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(layer.lengths.get(), 0x01, layer.lengths.bytes(),
                                             stream),
                             "lengths");
    layer.buffers = mla::CompactBuffers(shape, layer.latent.as<bf16>(), layer.w_uv.as<bf16>(),
                                        layer.gate.as<bf16>(), layer.lengths.as<int32_t>(),
                                        layer.output.as<bf16>());
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "layer set-up");
  return layers;
}

absl::StatusOr<double> TimeCapturedGraph(cudaStream_t stream,
                                         const std::function<absl::Status(cudaStream_t)>& enqueue,
                                         int replays, int warmup) {
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                           "cudaStreamBeginCapture");
  const absl::Status enqueued = enqueue(stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  MLA_RETURN_IF_ERROR(enqueued);
  MLA_RETURN_IF_CUDA_ERROR(ended, "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  MLA_RETURN_IF_CUDA_ERROR(instantiated, "cudaGraphInstantiate");

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  absl::Status status;
  for (int i = 0; i < warmup + replays && status.ok(); ++i) {
    cudaEventRecord(start, stream);
    status = mla::CudaStatus(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    cudaEventRecord(stop, stream);
    if (status.ok()) status = mla::CudaStatus(cudaEventSynchronize(stop), "replay");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= warmup) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  MLA_RETURN_IF_ERROR(status);
  std::sort(times.begin(), times.end());
  return 1000.0 * times[times.size() / 2];
}

absl::StatusOr<double> MeasureCopyBandwidth(cudaStream_t stream) {
  constexpr size_t kBytes = size_t{1} << 30;
  absl::StatusOr<DeviceMemory> a = DeviceMemory::Allocate(kBytes);
  if (!a.ok()) return a.status();
  absl::StatusOr<DeviceMemory> b = DeviceMemory::Allocate(kBytes);
  if (!b.ok()) return b.status();
  MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(a->get(), 1, kBytes, stream), "memset");
  absl::StatusOr<double> us = TimeCapturedGraph(
      stream,
      [&](cudaStream_t s) {
        return mla::CudaStatus(LaunchCopyKernel(a->get(), b->get(), kBytes, s), "copy");
      },
      10);
  if (!us.ok()) return us.status();
  return 2.0 * kBytes / (*us * 1e-6);
}

std::string DeviceDescription() {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown device";
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return absl::StrCat(prop.name, ", ", prop.multiProcessorCount, " SMs, ",
                      prop.l2CacheSize >> 20, " MB L2, CUDA driver ", driver / 1000, ".",
                      (driver % 1000) / 10);
}

}  // namespace mla_bench

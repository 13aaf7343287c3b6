#include "bench/bench_util.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/limit_kernels.h"
#include "bench/median.h"
#include "bench/stream_hold.h"
#include "mla/internal/cuda_status.h"
#include "mla/internal/value_bmm.h"
#include "testing/support/fill.h"
#include "testing/support/test_values.h"

namespace mla_tail_bench {

std::vector<int> ParseIntList(const std::string& text) {
  std::vector<int> values;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v)) values.push_back(v);
  }
  return values;
}

using mla_tail::bf16;
using mla_tail::kLatentDim;
using mla_tail::kValueDim;
using mla_tail_testing::DeviceMemory;

int64_t TailBytes(const mla_tail::TailShape& s) {
  const int64_t h = s.heads, b = s.rows;
  return 2 * (h * kValueDim * kLatentDim + b * h * kLatentDim + 2 * b * h * kValueDim) +
         4 * (b / s.q);
}

int64_t TailBytes(const mla_tail::TailShape& s, mla_tail::WeightType weight,
                  mla_tail::OutputType output, bool gated) {
  const int64_t h = s.heads, b = s.rows;
  int64_t bytes = TailBytes(s);
  if (weight == mla_tail::WeightType::kE4m3) bytes += -h * kValueDim * kLatentDim + 16 * h;
  if (output == mla_tail::OutputType::kE4m3) bytes += -b * h * kValueDim + 4 * b * h;
  if (!gated) bytes -= 2 * b * h * kValueDim;
  return bytes;
}

namespace {
// Code index r in [0, 254) as a code: 0x00..0x7e, 0x80..0xfe (no NaN codes).
uint8_t CodeOfIndex(uint32_t r) { return static_cast<uint8_t>(r < 0x7f ? r : r + 1); }
uint32_t Fp8BaseIndex(int64_t i) {
  return static_cast<uint32_t>(mla_tail_testing::SplitMix64(i) % 254);
}
}  // namespace

uint8_t Fp8LayerCode(int layer, int64_t i) {
  return CodeOfIndex((Fp8BaseIndex(i) + 37u * static_cast<uint32_t>(layer)) % 254);
}

float Fp8LayerScale(int layer, int head, int block) {
  return (1.0f / 128) * (1.0f + static_cast<float>((layer + 3 * head + block) % 8) / 8);
}

absl::StatusOr<std::vector<Fp8Layer>> MakeFp8Layers(const mla_tail::TailShape& shape, int count,
                                                    cudaStream_t stream) {
  std::vector<Fp8Layer> layers(count);
  const int64_t h = shape.heads, b = shape.rows;
  // Codes and scales of a checkpoint's range, each layer its own (a kernel that read another
  // layer's W_UV would show in the output check): one draw of code indices, rotated by layer.
  std::vector<uint8_t> base(h * kValueDim * kLatentDim);
  for (size_t i = 0; i < base.size(); ++i) {
    base[i] = static_cast<uint8_t>(Fp8BaseIndex(static_cast<int64_t>(i)));
  }
  std::vector<uint8_t> codes(base.size());
  std::vector<float> scales(h * 4);
  for (int index = 0; index < count; ++index) {
    Fp8Layer& layer = layers[index];
    uint8_t code_of[254];  // base index -> this layer's code
    for (uint32_t r = 0; r < 254; ++r) {
      code_of[r] = CodeOfIndex((r + 37u * static_cast<uint32_t>(index)) % 254);
    }
    for (size_t i = 0; i < base.size(); ++i) codes[i] = code_of[base[i]];
    for (int64_t j = 0; j < h * 4; ++j) {
      scales[j] = Fp8LayerScale(index, static_cast<int>(j / 4), static_cast<int>(j % 4));
    }
    MLA_RETURN_IF_ERROR(layer.w.Reset(codes.size()));
    MLA_RETURN_IF_ERROR(layer.w_scales.Reset(scales.size() * sizeof(float)));
    MLA_RETURN_IF_ERROR(layer.output.Reset(b * h * kValueDim));
    MLA_RETURN_IF_ERROR(layer.output_scales.Reset(b * h * sizeof(float)));
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(layer.w.get(), codes.data(), codes.size(), cudaMemcpyHostToDevice, stream),
        "upload e4m3 W_UV");
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(layer.w_scales.get(), scales.data(), scales.size() * sizeof(float),
                        cudaMemcpyHostToDevice, stream),
        "upload block scales");
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "e4m3 layer set-up");
  }
  return layers;
}

mla_tail::TailBuffers Fp8Buffers(const mla_tail::TailShape& shape, const Layer& layer,
                                 const Fp8Layer& fp8, bool weight, bool output) {
  mla_tail::TailBuffers b = layer.buffers;
  if (weight) {
    b.w_uv = nullptr;
    b.w_uv_fp8 = fp8.w.as<mla_tail::fp8_e4m3>();
    b.w_uv_scale = fp8.w_scales.as<float>();
    b.w_uv_scale_head_stride = 4;
  }
  if (output) {
    b.output = nullptr;
    b.output_fp8 = fp8.output.as<mla_tail::fp8_e4m3>();
    b.output_scale = fp8.output_scales.as<float>();
    b.output_scale_row_stride = shape.heads;
    b.output_scale_head_stride = 1;
  }
  return b;
}

int LayersForColdL2(int64_t per_layer, int min_layers, int max_layers, int64_t cold_bytes) {
  per_layer = std::max<int64_t>(per_layer, 1);
  const int64_t needed = (cold_bytes + per_layer - 1) / per_layer;
  return static_cast<int>(std::clamp<int64_t>(needed, min_layers, max_layers));
}

absl::StatusOr<std::vector<Layer>> MakeLayers(const mla_tail::TailShape& shape, int count,
                                              cudaStream_t stream) {
  std::vector<Layer> layers(count);
  const int64_t h = shape.heads, b = shape.rows;
  for (int i = 0; i < count; ++i) {
    Layer& layer = layers[i];
    struct Alloc {
      DeviceMemory* memory;
      int64_t bytes;
    };
    for (const Alloc& a :
         {Alloc{&layer.latent, b * h * kLatentDim * 2},
          Alloc{&layer.w_uv, h * kValueDim * kLatentDim * 2},
          Alloc{&layer.gate, b * h * kValueDim * 2}, Alloc{&layer.lengths, (b / shape.q) * 4},
          Alloc{&layer.output, b * h * kValueDim * 2}}) {
      MLA_RETURN_IF_ERROR(a.memory->Reset(a.bytes));
    }
    using mla_tail_testing::Values;
    const uint64_t seed = LayerSeed(i);
    MLA_RETURN_IF_CUDA_ERROR(
        mla_tail_testing::FillTestValues(
            {layer.latent.as<uint16_t>(), b, h, kLatentDim, h * kLatentDim, kLatentDim}, seed,
            Values::kUniform, stream),
        "fill latent");
    MLA_RETURN_IF_CUDA_ERROR(
        mla_tail_testing::FillTestValues({layer.w_uv.as<uint16_t>(), h, kValueDim, kLatentDim,
                                          kValueDim * kLatentDim, kLatentDim},
                                         seed + 1, Values::kUniform, stream),
        "fill w_uv");
    MLA_RETURN_IF_CUDA_ERROR(mla_tail_testing::FillTestValues(
                                 {layer.gate.as<uint16_t>(), b, 1, h * kValueDim, h * kValueDim, 0},
                                 seed + 2, Values::kUniformGates, stream),
                             "fill gate");
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(layer.lengths.get(), 0x01, layer.lengths.bytes(), stream), "lengths");
    layer.buffers = mla_tail::CompactBuffers(shape, layer.latent.as<bf16>(), layer.w_uv.as<bf16>(),
                                             layer.gate.as<bf16>(), layer.lengths.as<int32_t>(),
                                             layer.output.as<bf16>());
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "layer set-up");
  return layers;
}

absl::StatusOr<double> TimeOnStream(cudaStream_t stream,
                                    const std::function<absl::Status(cudaStream_t)>& enqueue,
                                    int replays, int warmup) {
  cudaEvent_t start, stop;
  MLA_RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
  if (const cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {
    cudaEventDestroy(start);
    return mla_tail::internal::CudaStatus(e, "cudaEventCreate");
  }
  // Each timed replay's work waits behind a hold until it is all enqueued (stream_hold.h). The
  // warm-up replays run unheld: first uses may wait on the GPU (an upload, a lazy load).
  StreamHold hold;
  std::vector<float> times;
  absl::Status status;
  for (int i = 0; i < warmup + replays && status.ok(); ++i) {
    const bool held = i >= warmup;
    if (held) status = mla_tail::internal::CudaStatus(hold.Hold(stream), "the stream hold");
    if (status.ok()) {
      status = mla_tail::internal::CudaStatus(cudaEventRecord(start, stream), "cudaEventRecord");
    }
    if (status.ok()) status = enqueue(stream);
    if (status.ok()) {
      status = mla_tail::internal::CudaStatus(cudaEventRecord(stop, stream), "cudaEventRecord");
    }
    hold.Release();
    // Drained even after a failure, so that no work outlives the events.
    const absl::Status drained =
        mla_tail::internal::CudaStatus(cudaStreamSynchronize(stream), "timed work");
    if (status.ok()) status = drained;
    if (status.ok() && held && hold.TimedOut()) {
      status = absl::InternalError(
          "the stream hold timed out: enqueueing the timed work waited on the GPU");
    }
    float ms = 0;
    if (status.ok()) {
      status = mla_tail::internal::CudaStatus(cudaEventElapsedTime(&ms, start, stop),
                                              "cudaEventElapsedTime");
    }
    if (i >= warmup) times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  MLA_RETURN_IF_ERROR(status);
  return 1000.0 * Median(times);
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
  // Uploaded before any timing, so that no launch does it.
  cudaError_t uploaded = cudaGraphUpload(exec, stream);
  if (uploaded == cudaSuccess) uploaded = cudaStreamSynchronize(stream);
  if (uploaded != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    return mla_tail::internal::CudaStatus(uploaded, "cudaGraphUpload");
  }
  absl::StatusOr<double> us = TimeOnStream(
      stream,
      [exec](cudaStream_t s) {
        return mla_tail::internal::CudaStatus(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      },
      replays, warmup);
  cudaGraphExecDestroy(exec);
  return us;
}

absl::StatusOr<CopyRates> MeasureCopyRates(cudaStream_t stream) {
  constexpr size_t kBytes = size_t{1} << 30;
  absl::StatusOr<DeviceMemory> a = DeviceMemory::Allocate(kBytes);
  if (!a.ok()) return a.status();
  absl::StatusOr<DeviceMemory> b = DeviceMemory::Allocate(kBytes);
  if (!b.ok()) return b.status();
  MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(a->get(), 1, kBytes, stream), "memset");
  absl::StatusOr<double> kernel_us = TimeCapturedGraph(
      stream,
      [&](cudaStream_t s) {
        return mla_tail::internal::CudaStatus(LaunchCopyKernel(a->get(), b->get(), kBytes, s),
                                              "copy");
      },
      10);
  if (!kernel_us.ok()) return kernel_us.status();
  // On the stream itself, as runtimes copy: the same copy as a graph's memcpy node measured
  // about two thirds of this rate on an H200.
  absl::StatusOr<double> memcpy_us = TimeOnStream(
      stream,
      [&](cudaStream_t s) {
        return mla_tail::internal::CudaStatus(
            cudaMemcpyAsync(b->get(), a->get(), kBytes, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync");
      },
      10);
  if (!memcpy_us.ok()) return memcpy_us.status();
  CopyRates rates;
  rates.kernel = 2.0 * kBytes / (*kernel_us * 1e-6);
  rates.memcpy = 2.0 * kBytes / (*memcpy_us * 1e-6);
  return rates;
}

double TailFlops(const mla_tail::TailShape& s) {
  return 2.0 * s.rows * s.heads * kLatentDim * kValueDim;
}

absl::StatusOr<double> MeasureMatrixRate(cudaStream_t stream) {
  constexpr int64_t kN = 8192;
  constexpr size_t kMatrixBytes = size_t{kN} * kN * sizeof(bf16);
  constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  absl::StatusOr<DeviceMemory> a = DeviceMemory::Allocate(kMatrixBytes);
  if (!a.ok()) return a.status();
  absl::StatusOr<DeviceMemory> b = DeviceMemory::Allocate(kMatrixBytes);
  if (!b.ok()) return b.status();
  absl::StatusOr<DeviceMemory> d = DeviceMemory::Allocate(kMatrixBytes);
  if (!d.ok()) return d.status();
  absl::StatusOr<DeviceMemory> workspace = DeviceMemory::Allocate(kWorkspaceBytes);
  if (!workspace.ok()) return workspace.status();
  // Small nonzero operands (bf16 0x3c3c, about 0.0115): zeros would spare the multipliers power.
  for (DeviceMemory* m : {&*a, &*b}) {
    MLA_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(m->get(), 0x3c, kMatrixBytes, stream), "memset");
  }

  // The descriptors, destroyed however this returns.
  struct Lt {
    cublasLtHandle_t handle = nullptr;
    cublasLtMatmulDesc_t matmul = nullptr;
    cublasLtMatrixLayout_t layout = nullptr;  // A, B and D alike: kN x kN, column-major
    cublasLtMatmulPreference_t preference = nullptr;
    ~Lt() {
      if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
      if (matmul != nullptr) cublasLtMatmulDescDestroy(matmul);
      if (handle != nullptr) cublasLtDestroy(handle);
    }
  } lt;
  using mla_tail::internal::CublasStatus;
  MLA_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&lt.handle), "cublasLtCreate"));
  MLA_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulDescCreate(&lt.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                   "cublasLtMatmulDescCreate"));
  MLA_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&lt.layout, CUDA_R_16BF, kN, kN, kN),
                                   "cublasLtMatrixLayoutCreate"));
  MLA_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(&lt.preference),
                                   "cublasLtMatmulPreferenceCreate"));
  MLA_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulPreferenceSetAttribute(lt.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &kWorkspaceBytes, sizeof(kWorkspaceBytes)),
      "cublasLtMatmulPreferenceSetAttribute"));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  MLA_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulAlgoGetHeuristic(lt.handle, lt.matmul, lt.layout, lt.layout, lt.layout,
                                     lt.layout, lt.preference, 1, &heuristic, &found),
      "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) return absl::NotFoundError("cuBLASLt found no algorithm for the rate GEMM");
  const float alpha = 1.0f, beta = 0.0f;
  absl::StatusOr<double> us = TimeCapturedGraph(
      stream,
      [&](cudaStream_t s) {
        return CublasStatus(
            cublasLtMatmul(lt.handle, lt.matmul, &alpha, a->get(), lt.layout, b->get(), lt.layout,
                           &beta, d->get(), lt.layout, d->get(), lt.layout, &heuristic.algo,
                           workspace->get(), kWorkspaceBytes, s),
            "cublasLtMatmul");
      },
      20);
  if (!us.ok()) return us.status();
  return 2.0 * kN * kN * kN / (*us * 1e-6);
}

std::string DeviceDescription() {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown device";
  int driver = 0;
  cudaDriverGetVersion(&driver);
  return absl::StrCat(prop.name, ", ", prop.multiProcessorCount, " SMs, ", prop.l2CacheSize >> 20,
                      " MB L2, CUDA driver ", driver / 1000, ".", (driver % 1000) / 10);
}

}  // namespace mla_tail_bench

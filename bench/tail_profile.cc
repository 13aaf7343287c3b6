// The kernels a profiler should see, and nothing else: for each shape, the fused tail's kernel
// (dispatched, or forced) and the streaming floor's kernel reading the same bytes, each launched a
// few times on its own stream between cudaProfilerStart and cudaProfilerStop, so that
//
//   ncu --profile-from-start off --clock-control none ... tail_profile --shapes=8x64,12x512
//
// profiles exactly those launches (its cache control flushes L2 before each: cold, as in a
// model). Set-up (layers, the tails' creation, the floor's measurement, which picks the floor
// kernel's blocks a multiprocessor) runs outside that range. --gates=gated,none launches each
// kernel with the layer's gate and without one (gate == nullptr) in turn. Prints one line per
// launch: shape, what ran, its gate form, its grid.

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "bench/stream_floor.h"
#include "mla/kernels/launch.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/gpu.h"

ABSL_FLAG(std::string, shapes, "8x64,12x32,12x512,8x1024", "heads x rows, comma-separated");
ABSL_FLAG(int, q, 1, "tokens per request");
ABSL_FLAG(std::string, kernels, "Auto",
          "fused kernels to launch per shape: Auto (the rule) or kernel names (FusedKernelName)");
ABSL_FLAG(int, launches, 2, "launches of each kernel, each on its own layer");
ABSL_FLAG(bool, stream, true, "also launch the streaming floor's kernel on the same bytes");
ABSL_FLAG(std::string, gates, "gated",
          "gate forms to launch each kernel with, in turn: gated (the layers' gates), none "
          "(gate == nullptr), or both as gated,none");

namespace mla_tail_bench {
namespace {

bool KernelByName(const std::string& name, mla_tail::FusedKernel* kernel) {
  if (name == "Auto") {
    *kernel = mla_tail::FusedKernel::kAuto;
    return true;
  }
  for (mla_tail::FusedKernel k : mla_tail::kFusedKernels) {
    if (name == mla_tail::FusedKernelName(k)) {
      *kernel = k;
      return true;
    }
  }
  return false;
}

int Main() {
  if (absl::Status gpu = mla_tail_testing::GpuUsable(); !gpu.ok()) {
    std::fprintf(stderr, "tail_profile: no usable GPU: %s\n", gpu.ToString().c_str());
    return mla_tail_testing::GpuRequired() ? 1 : 0;
  }
  int sms = 0;
  if (mla_tail::internal::MultiprocessorCount(0, &sms) != cudaSuccess) return 1;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const int launches = absl::GetFlag(FLAGS_launches);

  struct Work {
    mla_tail::TailShape shape;
    std::vector<Layer> layers;
    std::vector<std::pair<mla_tail::FusedKernel, std::unique_ptr<mla_tail::MlaTail>>> tails;
    mla_tail_testing::DeviceMemory stream_bytes;
    int stream_blocks = 0;
    StreamReadShape stream_shape;
  };
  std::vector<Work> work;
  for (absl::string_view text : absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',')) {
    std::vector<absl::string_view> hr = absl::StrSplit(text, 'x');
    Work w;
    if (hr.size() != 2 || !absl::SimpleAtoi(hr[0], &w.shape.heads) ||
        !absl::SimpleAtoi(hr[1], &w.shape.rows)) {
      std::fprintf(stderr, "tail_profile: bad shape '%s'\n", std::string(text).c_str());
      return 1;
    }
    w.shape.q = absl::GetFlag(FLAGS_q);
    absl::StatusOr<std::vector<Layer>> layers = MakeLayers(w.shape, launches, stream);
    if (!layers.ok()) {
      std::fprintf(stderr, "layers: %s\n", layers.status().ToString().c_str());
      return 1;
    }
    w.layers = *std::move(layers);
    for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_kernels), ',')) {
      mla_tail::FusedKernel kernel;
      if (!KernelByName(std::string(name), &kernel)) {
        std::fprintf(stderr, "tail_profile: no kernel '%s'\n", std::string(name).c_str());
        return 1;
      }
      mla_tail::TailOptions options;
      options.max_heads = w.shape.heads;
      options.max_rows = w.shape.rows;
      options.bmm = false;
      options.fused_kernel = kernel;
      absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
          mla_tail::MlaTail::Create(0, options);
      if (!tail.ok()) {
        std::fprintf(stderr, "MlaTail: %s\n", tail.status().ToString().c_str());
        return 1;
      }
      w.tails.emplace_back(
          mla_tail::internal::ResolveFusedKernel(kernel, w.shape.heads, w.shape.rows, sms),
          *std::move(tail));
    }
    if (absl::GetFlag(FLAGS_stream)) {
      const int64_t bytes = (TailBytes(w.shape) + 15) / 16 * 16;
      StreamFloor floor;
      if (const cudaError_t e = MeasureStreamFloor(bytes, stream, &floor); e != cudaSuccess) {
        std::fprintf(stderr, "stream floor: %s\n", cudaGetErrorString(e));
        return 1;
      }
      w.stream_blocks = floor.blocks;
      w.stream_shape = floor.shape;
      absl::Status allocated = w.stream_bytes.Reset(bytes * launches);
      if (!allocated.ok()) {
        std::fprintf(stderr, "stream bytes: %s\n", allocated.ToString().c_str());
        return 1;
      }
      cudaMemsetAsync(w.stream_bytes.get(), 0x5a, bytes * launches, stream);
      std::printf("# %dx%d: streaming floor %.3f us at %d blocks (%.2f a multiprocessor)\n",
                  w.shape.heads, w.shape.rows, floor.us, floor.blocks, floor.blocks_per_sm);
    }
    work.push_back(std::move(w));
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) return 1;

  std::vector<bool> gate_forms;
  for (absl::string_view form : absl::StrSplit(absl::GetFlag(FLAGS_gates), ',')) {
    if (form != "gated" && form != "none") {
      std::fprintf(stderr, "tail_profile: bad gate form '%s'\n", std::string(form).c_str());
      return 1;
    }
    gate_forms.push_back(form == "gated");
  }

  std::printf("heads,rows,q,launch,kernel,gate,grid\n");
  cudaProfilerStart();
  int failures = 0;
  for (Work& w : work) {
    for (auto& [kernel, tail] : w.tails) {
      for (int i = 0; i < launches; ++i) {
        for (const bool gated : gate_forms) {
          mla_tail::TailBuffers buffers = w.layers[i].buffers;
          if (!gated) buffers.gate = nullptr;
          const absl::Status run = tail->Run(w.shape, buffers, stream);
          if (!run.ok()) {
            std::fprintf(stderr, "run: %s\n", run.ToString().c_str());
            ++failures;
          }
          std::printf("%d,%d,%d,%d,%s,%s,\n", w.shape.heads, w.shape.rows, w.shape.q, i,
                      mla_tail::FusedKernelName(kernel), gated ? "gated" : "none");
        }
      }
    }
    if (w.stream_blocks > 0) {
      const int64_t bytes = (TailBytes(w.shape) + 15) / 16 * 16;
      for (int i = 0; i < launches; ++i) {
        if (LaunchStreamRead(static_cast<const char*>(w.stream_bytes.get()) + i * bytes, bytes,
                             w.stream_blocks, stream, /*pdl=*/true,
                             w.stream_shape) != cudaSuccess) {
          ++failures;
        }
        std::printf("%d,%d,%d,%d,StreamRead,,%d\n", w.shape.heads, w.shape.rows, w.shape.q, i,
                    w.stream_blocks);
      }
    }
  }
  if (cudaStreamSynchronize(stream) != cudaSuccess) ++failures;
  cudaProfilerStop();
  cudaStreamDestroy(stream);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mla_tail_bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return mla_tail_bench::Main();
}

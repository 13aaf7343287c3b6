#ifndef MLA_TAIL_BENCH_BENCH_UTIL_H_
#define MLA_TAIL_BENCH_BENCH_UTIL_H_

// Shared pieces of the benchmark programs: per-layer device buffers rotated to keep L2 cold,
// graph timing with CUDA events, the copy-bandwidth limit, and result records.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/problem.h"

namespace mla_tail_bench {

// The integers of a comma-separated flag value ("1,2,4"); entries that are not integers are
// skipped.
std::vector<int> ParseIntList(const std::string& text);

// One layer's tail inputs and output, filled with uniform test values; every request active.
struct Layer {
  mla_tail_testing::DeviceMemory latent, w_uv, gate, lengths, output;
  mla_tail::TailBuffers buffers;
};

// Bytes the tail must move per layer: W_UV, latent, gate and lengths read once, output written.
int64_t TailBytes(const mla_tail::TailShape& shape);
// The same with W_UV and the output of the given types (e4m3: a byte a value, and the scales),
// and without the gate when `gated` is false (the tail without one reads none).
int64_t TailBytes(const mla_tail::TailShape& shape, mla_tail::WeightType weight,
                  mla_tail::OutputType output, bool gated = true);

// A layer's e4m3 tensors for the benchmarks' e4m3 modes: W_UV [H, 128, 512] with [H, 4] block
// scales (uniform codes, scales about 2^-7), the e4m3 output [B, H * 128] with [B, H] scales.
struct Fp8Layer {
  mla_tail_testing::DeviceMemory w, w_scales, output, output_scales;
};
// The e4m3 code of W_UV element i (in [H, 128, 512] order) of MakeFp8Layers's layer `layer` (no
// NaN codes), and the scale of its block (head, block) (2^-7 to 2^-7 * 15 / 8): each layer's own.
uint8_t Fp8LayerCode(int layer, int64_t i);
float Fp8LayerScale(int layer, int head, int block);
absl::StatusOr<std::vector<Fp8Layer>> MakeFp8Layers(const mla_tail::TailShape& shape, int count,
                                                    cudaStream_t stream);
// `layer`'s buffers with e4m3 W_UV (`weight`) and the e4m3 output (`output`) from `fp8`.
mla_tail::TailBuffers Fp8Buffers(const mla_tail::TailShape& shape, const Layer& layer,
                                 const Fp8Layer& fp8, bool weight, bool output);

// Layers enough that their bytes, `per_layer_bytes` each, exceed `cold_bytes` (three L2s by
// default), at least `min_layers`, at most `max_layers`. A run of several modes counts the bytes
// of the one that moves the fewest (TailBytes of its types), so that every mode runs L2-cold.
int LayersForColdL2(int64_t per_layer_bytes, int min_layers, int max_layers,
                    int64_t cold_bytes = int64_t{180} << 20);

absl::StatusOr<std::vector<Layer>> MakeLayers(const mla_tail::TailShape& shape, int count,
                                              cudaStream_t stream);

// The seed of MakeLayers's layer `index`: its latent, W_UV and gate take seed, seed + 1, seed + 2.
inline uint64_t LayerSeed(int index) { return 1000 + 4 * uint64_t(index); }

// Enqueues `enqueue`'s work on `stream` between two events, `warmup` then `replays` times, and
// returns the median time in microseconds. Each time the stream is held (StreamHold) until the
// work and the stop event are enqueued, so the events time the GPU's work alone, back to back,
// without the host's submission; work whose enqueueing waits on the GPU is refused (the hold
// times out). The work must not synchronise.
absl::StatusOr<double> TimeOnStream(cudaStream_t stream,
                                    const std::function<absl::Status(cudaStream_t)>& enqueue,
                                    int replays, int warmup = 3);

// Captures `enqueue` (which enqueues work on the stream it is given) into a graph, replays it
// `warmup` then `replays` times, and returns the median replay time in microseconds.
absl::StatusOr<double> TimeCapturedGraph(cudaStream_t stream,
                                         const std::function<absl::Status(cudaStream_t)>& enqueue,
                                         int replays, int warmup = 3);

// Device-to-device copy rates in bytes/s (read + write), each the median of replays over a
// 1 GiB buffer: the project's copy kernel and cudaMemcpyAsync. The limits use the higher.
struct CopyRates {
  double kernel = 0;
  double memcpy = 0;
  double best() const { return kernel > memcpy ? kernel : memcpy; }
};
absl::StatusOr<CopyRates> MeasureCopyRates(cudaStream_t stream);

// The bf16 matrix rate in FLOP/s: a cuBLASLt GEMM of 8192 x 8192 x 8192, bf16 operands and
// output, FP32 accumulation (the tail's own types), the median of 20 replays.
absl::StatusOr<double> MeasureMatrixRate(cudaStream_t stream);

// The tail's multiply-adds as FLOPs: 2 x rows x heads x 512 x 128.
double TailFlops(const mla_tail::TailShape& shape);

// "NVIDIA H200, driver 580.x" and so on, for result headers.
std::string DeviceDescription();

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_BENCH_UTIL_H_

// tile_movement_probe: what the tiles' data movement alone costs in the decode-step
// embedding, beside the streaming floor of the same bytes. Each block stands for one
// kRows x kCols tile of the tail (64 x 32, 64 x 64 and 64 x 128 as the library's tile kernels
// cut the output; 64 x 16, 32 x 32 and 32 x 64 as finer grids would) and moves exactly that
// tile's bytes, with no MMA and no sigmoid:
//   before griddepcontrol.wait: its head's W_UV columns (kCols x 1 KB) into shared memory;
//   after it:                   its latent rows (1 KB each) and its gate tile, every copy in
//                               flight at once, then launch_dependents;
//   once they land:             the output tile written (the gate tile's words, xor-ed with a
//                               latent and a W_UV word so that none is dead).
// Three ways to copy: cp_async, 16-byte cp.async.cg copies issued by every thread, each
// address computed at its copy; cp_async_addressed, the same copies with each thread's sources
// computed before the wait, a copy after it one cp.async from a register and a constant offset,
// as the tile kernels issue them; bulk, one cp.async.bulk a latent or gate row and one for the
// W_UV columns (the copy engine, as a TMA producer would use), completing an mbarrier.
// Rows past the count are neither read nor written. Every layer's kernel is launched with the
// PDL attribute into one graph over enough layers that their bytes exceed 180 MB (L2 cold), as
// tail_bench runs the tail; the streaming floor (bench/stream_floor) is measured over the same
// layer count. If this kernel already takes more than the floor, so does any tail that moves
// the same bytes the same way, whatever its arithmetic.
// Output: CSV on stdout. Options: bench/tile_movement_probe.h.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>

#include "bench/bench_util.h"
#include "bench/cuda_check.h"
#include "bench/stream_floor.h"
#include "bench/tile_movement_probe.h"
#include "mla/internal/cuda_status.h"
#include "mla/kernels/device.cuh"
#include "mla/kernels/mbarrier.cuh"

namespace mla_tail_bench {
namespace {

namespace device = mla_tail::internal::device;

constexpr int kThreads = 128;
constexpr int64_t kRowBytes = 1024;  // 512 bf16 latent values, or a W_UV column's
using mla_tail::kLatentDim;
using mla_tail::kValueDim;

struct MoveParams {
  const char* latent;  // [rows][heads][512] bf16
  const char* w;       // [heads][128][512] bf16: column n of head h at (h * 128 + n) * 1 KB
  const char* gate;    // [rows][heads * 128] bf16
  char* out;           // [rows][heads * 128] bf16
  int heads;
  int rows;
};

template <int kRows, int kCols>
constexpr int SharedBytes() {
  return kCols * kRowBytes + kRows * kRowBytes + kRows * kCols * 2;
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) by the copy engine, counted on
// `barrier`'s transaction count as they land.
__device__ __forceinline__ void BulkCopy(uint32_t dst, const void* src, int bytes,
                                         uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(device::SmemAddress(barrier))
      : "memory");
}

enum class Copies { kCpAsync, kCpAsyncAddressed, kBulk };

// grid: (128 / kCols column tiles, row tiles of kRows, heads); kThreads threads.
template <int kRows, int kCols, Copies kCopies>
__global__ void __launch_bounds__(kThreads) TileMovementKernel(const MoveParams p) {
  static_assert(kRows <= kThreads / 2, "bulk: a thread for each latent row and each gate row");
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t barriers[2];  // bulk: W_UV's, then the latent's and gate's
  const int col0 = blockIdx.x * kCols;
  const int row0 = blockIdx.y * kRows;
  const int head = blockIdx.z;
  const uint32_t w_smem = device::SmemAddress(smem);
  const uint32_t latent_smem = w_smem + kCols * kRowBytes;
  const uint32_t gate_smem = latent_smem + kRows * kRowBytes;
  const int live = min(kRows, p.rows - row0);
  constexpr int kLatentWords = kRowBytes / 16;  // a row's
  constexpr int kGateWords = kCols * 2 / 16;    // a row's
  const int64_t out_row = static_cast<int64_t>(p.heads) * kValueDim * 2;
  const int64_t tile_col = (static_cast<int64_t>(head) * kValueDim + col0) * 2;
  const char* w = p.w + (static_cast<int64_t>(head) * kValueDim + col0) * kRowBytes;
  auto latent_row = [&](int r) {
    return p.latent + (static_cast<int64_t>(row0 + r) * p.heads + head) * kRowBytes;
  };
  auto gate_row = [&](int r) { return p.gate + (row0 + r) * out_row + tile_col; };

  if constexpr (kCopies == Copies::kBulk) {
    uint64_t* w_barrier = &barriers[0];
    uint64_t* data_barrier = &barriers[1];
    if (threadIdx.x == 0) {
      device::MbarrierInit(w_barrier, 1);
      device::MbarrierInit(data_barrier, 1);
      device::FenceMbarrierInitForCluster();  // the bulk copies complete at .shared::cluster
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      device::MbarrierArriveExpectBytes(w_barrier, kCols * kRowBytes);
      BulkCopy(w_smem, w, kCols * kRowBytes, w_barrier);
    }
    device::GridDependencyWait();
    // A copy may land before the expectation is set: the transaction count goes below zero
    // meanwhile, and the phase cannot end before thread 0's arrival.
    if (threadIdx.x == 0) {
      device::MbarrierArriveExpectBytes(data_barrier, live * (kRowBytes + kCols * 2));
    }
    if (threadIdx.x < live) {
      BulkCopy(latent_smem + threadIdx.x * kRowBytes, latent_row(threadIdx.x), kRowBytes,
               data_barrier);
    } else if (threadIdx.x >= kThreads / 2 && threadIdx.x - kThreads / 2 < live) {
      const int r = threadIdx.x - kThreads / 2;
      BulkCopy(gate_smem + r * kCols * 2, gate_row(r), kCols * 2, data_barrier);
    }
    device::LaunchDependents();
    device::MbarrierWait(w_barrier, 0);
    device::MbarrierWait(data_barrier, 0);
  } else {
    // kCpAsyncAddressed: thread t copies word t % words of rows t / words, + kThreads / words,
    // ... of each matrix, from sources computed before the wait.
    constexpr int kLatentRowsApart = kThreads / kLatentWords;
    constexpr int kGateRowsApart = kThreads / kGateWords;
    static_assert(kThreads % kLatentWords == 0 && kThreads % kGateWords == 0);
    const int latent_first = threadIdx.x / kLatentWords, latent_word = threadIdx.x % kLatentWords;
    const int gate_first = threadIdx.x / kGateWords, gate_word = threadIdx.x % kGateWords;
    const char* latent_src = latent_row(latent_first) + 16 * latent_word;
    const char* gate_src = gate_row(gate_first) + 16 * gate_word;
    const int64_t latent_step = static_cast<int64_t>(kLatentRowsApart) * p.heads * kRowBytes;
    const int64_t gate_step = kGateRowsApart * out_row;
    const uint32_t latent_dst = latent_smem + 16 * threadIdx.x;
    const uint32_t gate_dst = gate_smem + 16 * threadIdx.x;
    for (int i = threadIdx.x; i < kCols * kRowBytes / 16; i += kThreads) {
      device::CopyAsync16To(w_smem + 16 * i, w + 16 * i, 16);
    }
    device::CopyAsyncCommit();
    device::GridDependencyWait();
    if constexpr (kCopies == Copies::kCpAsyncAddressed) {
#pragma unroll
      for (int j = 0; j < kRows / kLatentRowsApart; ++j) {
        if (latent_first + j * kLatentRowsApart < live) {
          device::CopyAsync16To(latent_dst + j * kThreads * 16, latent_src + j * latent_step, 16);
        }
      }
#pragma unroll
      for (int j = 0; j < (kRows + kGateRowsApart - 1) / kGateRowsApart; ++j) {
        if (gate_first + j * kGateRowsApart < live) {
          device::CopyAsync16To(gate_dst + j * kThreads * 16, gate_src + j * gate_step, 16);
        }
      }
    } else {  // kCpAsync: each address computed at its copy
      for (int i = threadIdx.x; i < live * kLatentWords; i += kThreads) {
        const int r = i / kLatentWords, c = i % kLatentWords;
        device::CopyAsync16To(latent_smem + 16 * i, latent_row(r) + 16 * c, 16);
      }
      for (int i = threadIdx.x; i < live * kGateWords; i += kThreads) {
        const int r = i / kGateWords, c = i % kGateWords;
        device::CopyAsync16To(gate_smem + 16 * i, gate_row(r) + 16 * c, 16);
      }
    }
    device::CopyAsyncCommit();
    device::LaunchDependents();
    device::CopyAsyncWait<0>();
    __syncthreads();
  }

  for (int i = threadIdx.x; i < live * kGateWords; i += kThreads) {
    const int r = i / kGateWords, c = i % kGateWords;
    uint4 g, l, v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(g.x), "=r"(g.y), "=r"(g.z), "=r"(g.w)
                 : "r"(gate_smem + 16 * i));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(l.x), "=r"(l.y), "=r"(l.z), "=r"(l.w)
                 : "r"(latent_smem + 16 * (r * kLatentWords + c)));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(w_smem + 16 * ((c * kLatentWords + r) % (kCols * kLatentWords))));
    g.x ^= l.x ^ v.x;
    g.y ^= l.y ^ v.y;
    g.z ^= l.z ^ v.z;
    g.w ^= l.w ^ v.w;
    *reinterpret_cast<uint4*>(p.out + (row0 + r) * out_row + tile_col + 16 * c) = g;
  }
}

template <int kRows, int kCols, Copies kCopies>
cudaError_t Launch(const MoveParams& params, cudaStream_t stream) {
  cudaLaunchAttribute attributes[1];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(kValueDim / kCols, (params.rows + kRows - 1) / kRows, params.heads);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = SharedBytes<kRows, kCols>();
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, TileMovementKernel<kRows, kCols, kCopies>, params);
}

struct Layers {
  char* buffer = nullptr;
  int64_t stride = 0;  // bytes a layer
  int count = 0;
  int64_t latent_bytes = 0, w_bytes = 0, gate_bytes = 0;
  ~Layers() {
    if (buffer != nullptr) cudaFree(buffer);
  }
  MoveParams Of(int layer, int heads, int rows) const {
    char* base = buffer + layer * stride;
    return MoveParams{base,
                      base + latent_bytes,
                      base + latent_bytes + w_bytes,
                      base + latent_bytes + w_bytes + gate_bytes,
                      heads,
                      rows};
  }
};

// A tile's rows and columns, as types.
template <int kRows, int kCols>
using Tile = std::pair<std::integral_constant<int, kRows>, std::integral_constant<int, kCols>>;

// Microseconds a layer: the median over timed replays of one graph of `layers.count` launches.
template <int kRows, int kCols, Copies kCopies>
double TimeMovement(const Layers& layers, int heads, int rows, int replays, cudaStream_t stream) {
  const auto kernel = TileMovementKernel<kRows, kCols, kCopies>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  SharedBytes<kRows, kCols>()));
  const absl::StatusOr<double> us = TimeCapturedGraph(
      stream,
      [&](cudaStream_t s) {
        for (int l = 0; l < layers.count; ++l) {
          const cudaError_t e = Launch<kRows, kCols, kCopies>(layers.Of(l, heads, rows), s);
          if (e != cudaSuccess) return mla_tail::internal::CudaStatus(e, "TileMovementKernel");
        }
        return absl::OkStatus();
      },
      replays);
  if (!us.ok()) {
    std::fprintf(stderr, "tile_movement_probe: %s\n", us.status().ToString().c_str());
    std::exit(1);
  }
  return *us / layers.count;
}

}  // namespace

int RunTileMovementProbe(const TileMovementOptions& options) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf(
      "heads,rows,tile_rows,cols,copies,blocks,layers,bytes,movement_us,floor_us,"
      "movement_over_floor\n");
  for (const int heads : options.heads) {
    for (const int rows : options.rows) {
      const int64_t h = heads, b = rows;
      const int64_t bytes = TailBytes(mla_tail::TailShape{heads, rows, 1});
      Layers layers;
      layers.latent_bytes = b * h * kLatentDim * 2;
      layers.w_bytes = h * kValueDim * kLatentDim * 2;
      layers.gate_bytes = b * h * kValueDim * 2;
      layers.stride =
          (layers.latent_bytes + layers.w_bytes + 2 * layers.gate_bytes + 255) / 256 * 256;
      layers.count = options.layers > 0 ? options.layers : LayersForColdL2(bytes, 16, 512);
      CUDA_CHECK(cudaMalloc(&layers.buffer, layers.stride * layers.count));
      CUDA_CHECK(cudaMemsetAsync(layers.buffer, 0x3c, layers.stride * layers.count, stream));

      StreamFloorOptions floor_options;
      floor_options.min_layers = layers.count;
      floor_options.max_layers = layers.count;
      StreamFloor floor;
      CUDA_CHECK(MeasureStreamFloor(bytes, stream, &floor, floor_options));
      auto row = [&](int tile_rows, int cols, const char* copies, double us) {
        const int blocks = kValueDim / cols * ((rows + tile_rows - 1) / tile_rows) * heads;
        std::printf("%d,%d,%d,%d,%s,%d,%d,%lld,%.3f,%.3f,%.3f\n", heads, rows, tile_rows, cols,
                    copies, blocks, layers.count, static_cast<long long>(bytes), us, floor.us,
                    us / floor.us);
        std::fflush(stdout);
      };
      const auto tile = [&](auto rows_cols) {
        constexpr int kRows = decltype(rows_cols)::first_type::value;
        constexpr int kCols = decltype(rows_cols)::second_type::value;
        const int n = options.replays;
        row(kRows, kCols, "cp_async",
            TimeMovement<kRows, kCols, Copies::kCpAsync>(layers, heads, rows, n, stream));
        row(kRows, kCols, "cp_async_addressed",
            TimeMovement<kRows, kCols, Copies::kCpAsyncAddressed>(layers, heads, rows, n, stream));
        row(kRows, kCols, "bulk",
            TimeMovement<kRows, kCols, Copies::kBulk>(layers, heads, rows, n, stream));
      };
      tile(Tile<64, 32>());
      tile(Tile<64, 64>());
      tile(Tile<64, 128>());
      tile(Tile<64, 16>());
      tile(Tile<32, 32>());
      tile(Tile<32, 64>());
    }
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace mla_tail_bench

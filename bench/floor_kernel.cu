#include <cuda_runtime.h>

#include "bench/floor_kernel.h"
#include "mla/kernels/device.cuh"
#include "mla/kernels/launch.cuh"

namespace mla_bench {
namespace {

struct FloorParams {
  int unused;
};

__global__ void FloorKernel(const FloorParams) {
  mla::device::GridDependencyWait();
  mla::device::LaunchDependents();
}

}  // namespace

cudaError_t LaunchFloorKernel(int blocks, cudaStream_t stream, bool pdl) {
  return mla::LaunchWithPdl(FloorKernel, dim3(blocks), dim3(128), 0, stream, pdl, FloorParams{0});
}

}  // namespace mla_bench

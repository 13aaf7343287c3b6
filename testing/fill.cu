#include <cuda_runtime.h>

#include "testing/fill.h"

namespace mla_testing {
namespace {

__global__ void FillKernel(View3 view, uint64_t seed, Values kind) {
  const int64_t count = view.dim0 * view.dim1 * view.dim2;
  for (int64_t index = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; index < count;
       index += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = index % view.dim2;
    const int64_t j = (index / view.dim2) % view.dim1;
    const int64_t i = index / (view.dim2 * view.dim1);
    view.base[i * view.stride0 + j * view.stride1 + k] = TestValue(seed, index, kind);
  }
}

}  // namespace

cudaError_t FillTestValues(const View3& view, uint64_t seed, Values kind, cudaStream_t stream) {
  FillKernel<<<1024, 256, 0, stream>>>(view, seed, kind);
  return cudaGetLastError();
}

}  // namespace mla_testing

#include <cuda_runtime.h>

#include "mla/kernels/launch.h"
#include "testing/support/fill.h"

namespace mla_tail_testing {
namespace {

struct FillParams {
  View3 view;
  uint64_t seed;
  Values kind;
};

__global__ void FillKernel(const FillParams p) {
  const View3& view = p.view;
  const int64_t count = view.dim0 * view.dim1 * view.dim2;
  for (int64_t index = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; index < count;
       index += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = index % view.dim2;
    const int64_t j = (index / view.dim2) % view.dim1;
    const int64_t i = index / (view.dim2 * view.dim1);
    view.base[i * view.stride0 + j * view.stride1 + k] = TestValue(p.seed, index, p.kind);
  }
}

}  // namespace

cudaError_t FillTestValues(const View3& view, uint64_t seed, Values kind, cudaStream_t stream) {
  // The launch's own error, not a stale one left by an earlier call.
  return mla_tail::internal::LaunchWithPdl(FillKernel, dim3(1024), dim3(256), 0, stream,
                                           /*pdl=*/false, FillParams{view, seed, kind});
}

}  // namespace mla_tail_testing

#ifndef MLA_TAIL_TESTING_SUPPORT_FILL_H_
#define MLA_TAIL_TESTING_SUPPORT_FILL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "testing/support/test_values.h"

namespace mla_tail_testing {

// A strided 3-D view: element (i, j, k) at base + i * stride0 + j * stride1 + k, whose logical
// index (for TestValue) is (i * dim1 + j) * dim2 + k.
struct View3 {
  uint16_t* base;
  int64_t dim0, dim1, dim2;
  int64_t stride0, stride1;
};

// Writes TestValue(seed, logical index, kind) to every element of `view`.
cudaError_t FillTestValues(const View3& view, uint64_t seed, Values kind, cudaStream_t stream);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_FILL_H_

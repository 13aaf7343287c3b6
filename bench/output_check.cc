#include "bench/output_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "testing/support/test_values.h"

namespace mla_tail_bench {

using mla_tail::kLatentDim;
using mla_tail::kValueDim;
using mla_tail_testing::TestValue;
using mla_tail_testing::Values;

mla_tail_testing::ReferenceInputs LayerReferenceInputs(const mla_tail::TailShape& shape,
                                                       int index) {
  const uint64_t seed = LayerSeed(index);
  const int64_t heads = shape.heads, width = heads * kValueDim;
  mla_tail_testing::ReferenceInputs in;
  in.heads = shape.heads;
  in.q = shape.q;
  in.latent = [=](int t, int h, int k) {
    return TestValue(seed, (uint64_t(t) * heads + h) * kLatentDim + k, Values::kUniform);
  };
  in.w_uv = [=](int h, int k, int d) {
    return TestValue(seed + 1, (uint64_t(h) * kValueDim + d) * kLatentDim + k, Values::kUniform);
  };
  in.gate = [=](int t, int c) {
    return TestValue(seed + 2, uint64_t(t) * width + c, Values::kUniformGates);
  };
  in.lengths = [](int) { return 0x01010101; };  // every request active
  return in;
}

absl::Status PoisonOutputs(const std::vector<Layer>& layers, cudaStream_t stream) {
  for (const Layer& layer : layers) {
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(layer.output.get(), 0xff, layer.output.bytes(), stream), "poison output");
  }
  return absl::OkStatus();
}

absl::Status CheckOutputs(const mla_tail::TailShape& shape, const std::vector<Layer>& layers,
                          cudaStream_t stream) {
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "the timed runs");
  const int64_t width = int64_t{shape.heads} * kValueDim;
  const std::set<int> rows = {0, shape.rows / 2, shape.rows - 1};
  const int64_t columns = std::min<int64_t>(width, 256);
  std::string errors;
  int mismatches = 0;
  for (int index : std::set<int>{0, static_cast<int>(layers.size()) - 1}) {
    const mla_tail_testing::ReferenceInputs in = LayerReferenceInputs(shape, index);
    std::vector<uint16_t> row(width);
    for (int t : rows) {
      MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(row.data(), layers[index].buffers.output + t * width,
                                          width * 2, cudaMemcpyDeviceToHost),
                               "download output");
      for (int64_t j = 0; j < columns; ++j) {
        // Spread over the heads and columns: a stride coprime to the width.
        const int64_t c = (j * 2654435761ll + t) % width;
        std::string why;
        if (mla_tail_testing::OutputAgrees(
                mla_tail_testing::ReferenceOutput(in, t, static_cast<int>(c / kValueDim),
                                                  static_cast<int>(c % kValueDim)),
                row[c], /*exact=*/false, &why)) {
          continue;
        }
        if (++mismatches <= 4) {
          absl::StrAppend(&errors, "\n  layer ", index, " row ", t, " column ", c, ": ", why);
        }
      }
    }
  }
  if (mismatches == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(mismatches,
                                          " sampled output elements differ from the "
                                          "CPU reference (heads ",
                                          shape.heads, ", rows ", shape.rows, ", q ", shape.q,
                                          "):", errors));
}

}  // namespace mla_tail_bench

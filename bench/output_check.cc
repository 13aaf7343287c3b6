#include "bench/output_check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "mla/internal/cuda_status.h"
#include "testing/support/bf16_bits.h"
#include "testing/support/e4m3_bits.h"
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

namespace {

// The reference of layer `index` with the e4m3 W_UV of MakeFp8Layers where `weight`.
mla_tail_testing::ReferenceInputs InputsFor(const mla_tail::TailShape& shape, int index,
                                            bool weight) {
  mla_tail_testing::ReferenceInputs in = LayerReferenceInputs(shape, index);
  if (weight) {
    in.w_uv = nullptr;
    in.w_uv_fp8 = [index](int h, int k, int d) {
      return Fp8LayerCode(index, (int64_t{h} * kValueDim + d) * kLatentDim + k);
    };
    in.w_uv_scale = [index](int h, int block) { return Fp8LayerScale(index, h, block); };
  }
  return in;
}

}  // namespace

absl::Status CheckFp8Outputs(const mla_tail::TailShape& shape, const std::vector<Layer>& layers,
                             const std::vector<Fp8Layer>& fp8, bool weight, bool output,
                             cudaStream_t stream) {
  if (!output) return CheckOutputs(shape, layers, stream, weight);
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "the timed runs");
  const int64_t width = int64_t{shape.heads} * kValueDim;
  std::string errors;
  int mismatches = 0;
  for (int index : std::set<int>{0, static_cast<int>(layers.size()) - 1}) {
    mla_tail_testing::ReferenceInputs in = InputsFor(shape, index, weight);
    if (layers[index].buffers.gate == nullptr) in.gate = nullptr;
    std::vector<uint8_t> row(width);
    std::vector<float> scales(shape.heads);
    {  // every element and scale written: with finite data no code is 0xff and no scale NaN
      std::vector<uint8_t> codes(static_cast<size_t>(shape.rows) * width);
      std::vector<uint32_t> all_scales(static_cast<size_t>(shape.rows) * shape.heads);
      MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(codes.data(), fp8[index].output.as<uint8_t>(),
                                          codes.size(), cudaMemcpyDeviceToHost),
                               "download e4m3 output");
      MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(all_scales.data(), fp8[index].output_scales.get(),
                                          all_scales.size() * 4, cudaMemcpyDeviceToHost),
                               "download output scales");
      const int64_t unwritten =
          std::count(codes.begin(), codes.end(), uint8_t{0xff}) +
          std::count(all_scales.begin(), all_scales.end(), uint32_t{0xffffffff});
      if (unwritten > 0 && ++mismatches <= 4) {
        absl::StrAppend(&errors, "\n  layer ", index, ": ", unwritten,
                        " e4m3 codes or scales still hold the poison (unwritten)");
      }
    }
    std::set<int> sampled = {0, shape.rows / 2, shape.rows - 1};
    for (int tile = 0; tile < shape.rows; tile += 64) {
      sampled.insert(std::min(shape.rows - 1, tile + tile / 64 % 64));
    }
    for (int t : sampled) {
      MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(row.data(), fp8[index].output.as<uint8_t>() + t * width,
                                          width, cudaMemcpyDeviceToHost),
                               "download e4m3 output");
      MLA_RETURN_IF_CUDA_ERROR(
          cudaMemcpy(scales.data(), fp8[index].output_scales.as<float>() + t * shape.heads,
                     shape.heads * sizeof(float), cudaMemcpyDeviceToHost),
          "download output scales");
      // Each sampled head's scale against the reference's amax / 448: the amax of the bf16
      // values the contract allows lies between the largest of their smallest magnitudes and
      // the largest of their largest (a scale of a wrong group, or inflated, falls outside).
      auto check_scale = [&](int h) {
        float least = 0.0f, greatest = 0.0f;
        for (int d = 0; d < kValueDim; ++d) {
          const mla_tail_testing::OutputRange allowed = mla_tail_testing::AllowedOutputs(
              mla_tail_testing::ReferenceOutput(in, t, h, d), /*exact=*/false);
          const float a = std::fabs(allowed.least), b = std::fabs(allowed.greatest);
          const bool crosses_zero = (allowed.least <= 0.0f) != (allowed.greatest <= 0.0f);
          least = std::max(least, crosses_zero ? 0.0f : std::min(a, b));
          greatest = std::max(greatest, std::max(a, b));
        }
        const float low = least / 448.0f * (1.0f - 0x1p-20f);
        const float high = greatest / 448.0f * (1.0f + 0x1p-20f);
        if (low <= scales[h] && scales[h] <= high) return;
        if (++mismatches <= 4) {
          absl::StrAppend(&errors, "\n  layer ", index, " row ", t, " head ", h, ": scale ",
                          scales[h], " outside [", low, ", ", high, "] (amax / 448)");
        }
      };
      // Scales (128 reference values each) of four heads spread over the row, moved by the row,
      // on the first, middle and last rows only: at every sampled head and tile row they would
      // cost the step its time limit.
      if (t == 0 || t == shape.rows / 2 || t == shape.rows - 1) {
        std::set<int> heads;
        for (int k = 0; k < 4; ++k) heads.insert((k * shape.heads / 4 + t) % shape.heads);
        for (int h : heads) check_scale(h);
      }
      for (int64_t j = 0; j < std::min<int64_t>(width, 256); ++j) {
        const int64_t c = (j * 2654435761ll + t) % width;
        const int h = static_cast<int>(c / kValueDim);
        const mla_tail_testing::ReferenceElement ref =
            mla_tail_testing::ReferenceOutput(in, t, h, static_cast<int>(c % kValueDim));
        const float x = mla_tail_testing::Bf16ToFloat(ref.out);
        const mla_tail_testing::OutputRange allowed =
            mla_tail_testing::AllowedOutputs(ref, /*exact=*/false);
        const float got = mla_tail_testing::E4m3ToFloat(row[c]) * scales[h];
        // Half an e4m3 step (2^-4 relative; 2^-10 scales in the subnormals) around the bf16
        // outputs the contract allows.
        const float step =
            std::max(std::max(std::fabs(allowed.least), std::fabs(allowed.greatest)) * 0x1p-4f,
                     scales[h] * 0x1p-10f);
        if (allowed.least - step <= got && got <= allowed.greatest + step) continue;
        if (++mismatches <= 4) {
          absl::StrAppend(&errors, "\n  layer ", index, " row ", t, " column ", c, ": e4m3 0x",
                          absl::Hex(row[c]), " x scale ", scales[h], " = ", got, ", reference ", x);
        }
      }
    }
  }
  if (mismatches == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(mismatches,
                                          " sampled e4m3 output elements differ from the CPU "
                                          "reference (heads ",
                                          shape.heads, ", rows ", shape.rows, "):", errors));
}

absl::Status CheckOutputs(const mla_tail::TailShape& shape, const std::vector<Layer>& layers,
                          cudaStream_t stream, bool e4m3_weight, int live_rows, bool gated) {
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "the timed runs");
  const int64_t width = int64_t{shape.heads} * kValueDim;
  const int live = live_rows < 0 ? shape.rows : std::min(live_rows, shape.rows);
  // The first, middle and last live rows, and one row of each 64-row tile (a kernel that left a
  // tile unwritten, or wrote it wrong, shows in it).
  std::set<int> rows = live > 0 ? std::set<int>{0, live / 2, live - 1} : std::set<int>{};
  for (int tile = 0; tile < live; tile += 64)
    rows.insert(std::min(live - 1, tile + tile / 64 % 64));
  const std::set<int> past = live < shape.rows
                                 ? std::set<int>{live, (live + shape.rows) / 2, shape.rows - 1}
                                 : std::set<int>{};
  const int64_t columns = std::min<int64_t>(width, 256);
  std::string errors;
  int mismatches = 0;
  for (int index : std::set<int>{0, static_cast<int>(layers.size()) - 1}) {
    mla_tail_testing::ReferenceInputs in = InputsFor(shape, index, e4m3_weight);
    // The tail without a gate.
    if (!gated || layers[index].buffers.gate == nullptr) in.gate = nullptr;
    std::vector<uint16_t> row(width);
    if (live > 0) {  // every live element written: the data are finite, so no result is NaN
      std::vector<uint16_t> all(static_cast<size_t>(live) * width);
      MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(all.data(), layers[index].buffers.output, all.size() * 2,
                                          cudaMemcpyDeviceToHost),
                               "download output");
      const int64_t unwritten =
          std::count_if(all.begin(), all.end(), [](uint16_t bits) { return bits == 0xffff; });
      if (unwritten > 0 && ++mismatches <= 4) {
        absl::StrAppend(&errors, "\n  layer ", index, ": ", unwritten,
                        " live elements still hold the poison (unwritten)");
      }
    }
    for (int t : past) {  // never written: the poison whole
      MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(row.data(), layers[index].buffers.output + t * width,
                                          width * 2, cudaMemcpyDeviceToHost),
                               "download output");
      const int64_t written =
          std::count_if(row.begin(), row.end(), [](uint16_t bits) { return bits != 0xffff; });
      if (written > 0 && ++mismatches <= 4) {
        absl::StrAppend(&errors, "\n  layer ", index, " row ", t, " past the ", live,
                        " live rows: ", written, " elements written");
      }
    }
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

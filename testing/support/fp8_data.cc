#include "testing/support/fp8_data.h"

#include <array>
#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "testing/support/test_values.h"

namespace mla_tail_testing {
namespace {

constexpr uint8_t kSmallIntegerCodes[5] = {0xc0, 0xb8, 0x00, 0x38, 0x40};  // -2, -1, 0, 1, 2

uint8_t UnmarkedCode(const Fp8WeightOptions& o, int h, int k, int d) {
  const uint64_t r = SplitMix64(SplitMix64(o.seed) ^ ((uint64_t(h) * 128 + d) * 512 + k));
  switch (o.values) {
    case E4m3Values::kSmallIntegers:
      return kSmallIntegerCodes[r % 5];
    case E4m3Values::kIntegersToThree: {
      const uint8_t codes[7] = {0xc4, 0xc0, 0xb8, 0x00, 0x38, 0x40, 0x44};  // -3..3
      return codes[r % 7];
    }
    case E4m3Values::kEdges: {
      // +-448 once a column (in block (d + h) % 4), so that with latent integers up to 5 every
      // partial sum stays below 2^13 (exact in FP32 in steps of 2^-11; fp8_data.h).
      if (k == (d + h) % 128 + 128 * ((d + h) % 4)) return (d % 2) ? 0xfe : 0x7e;
      const uint8_t subnormals[4] = {0x01, 0x81, 0x07, 0x87};
      switch (k % 8) {
        case 1:
          return subnormals[r % 4];
        case 2:
          return (r % 2) ? 0x80 : 0x00;  // -0, +0
        case 3:
          return (r % 2) ? 0x88 : 0x08;  // the smallest normals
        default:
          return kSmallIntegerCodes[r % 5];
      }
    }
    case E4m3Values::kUniform: {
      const uint8_t code = static_cast<uint8_t>(r % 254);  // 0x00..0x7e, then 0x80..0xfe
      return code < 0x7f ? code : static_cast<uint8_t>(code + 1);
    }
  }
  return 0;
}

}  // namespace

float Fp8BlockScale(const Fp8WeightOptions& o, int h, int j) {
  // Four a cycle, so that the four blocks of a head each have their own.
  const float powers[4] = {1.0f, 0.5f, 0.25f, 2.0f};
  switch (o.scales) {
    case E4m3Scales::kPowersOfTwo:
      return powers[(h + j) % 4];
    case E4m3Scales::kOdd:
      return 0.01f + 0.04f * static_cast<float>(SplitMix64(o.seed * 7 + h * 4 + j) % 1000) / 1000 +
             0.0001234f;
    case E4m3Scales::kSomeZero:
      return j == h % 4 ? 0.0f : powers[(h + j) % 4];
    case E4m3Scales::kZeroHead:
      return h == 0 ? 0.0f : powers[(h + j) % 4];
    case E4m3Scales::kNanBlock:
      return h == 1 && j == 2 ? std::numeric_limits<float>::quiet_NaN() : powers[(h + j) % 4];
    case E4m3Scales::kInfBlock:
      return h == 1 && j == 2 ? std::numeric_limits<float>::infinity() : powers[(h + j) % 4];
  }
  return 0;
}

uint8_t Fp8WeightCode(const Fp8WeightOptions& o, int h, int k, int d) {
  for (size_t i = 0; i < o.nan_at.size(); ++i) {
    if (o.nan_at[i] == std::array<int, 3>{h, k, d}) return i % 2 ? 0xff : 0x7f;
  }
  return UnmarkedCode(o, h, k, d);
}

void ApplyHostFp8Weights(int heads, const Fp8WeightOptions& options, ReferenceInputs* in) {
  // Every code computed once, (h, d, k) with k innermost.
  auto codes = std::make_shared<std::vector<uint8_t>>(size_t(heads) * 128 * 512);
  for (int h = 0; h < heads; ++h) {
    for (int d = 0; d < 128; ++d) {
      for (int k = 0; k < 512; ++k)
        (*codes)[(size_t(h) * 128 + d) * 512 + k] = Fp8WeightCode(options, h, k, d);
    }
  }
  in->w_uv = nullptr;
  in->w_uv_fp8 = [codes](int h, int k, int d) { return (*codes)[(size_t(h) * 128 + d) * 512 + k]; };
  in->w_uv_scale = [options](int h, int j) { return Fp8BlockScale(options, h, j); };
}

}  // namespace mla_tail_testing

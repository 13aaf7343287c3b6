#include "reference.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "formulas.h"

namespace example {

uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = uint32_t{bits} << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

namespace {

constexpr int kLatentDim = 512;
constexpr int kValueDim = 128;

// Whether `got` is bf16(v * s') for a sigmoid s' within two FP32 ulps of the host's s (the
// device's expf differs from the host's by that much). v itself must be exact: the sums are
// exact (formulas.h), so the contract's bf16(v) leaves no latitude.
bool Agrees(uint16_t v, float s, uint16_t got) {
  float s_near = s;
  for (int i = 0; i < 2; ++i) s_near = std::nextafter(s_near, 0.0f);
  for (int i = 0; i < 5; ++i, s_near = std::nextafter(s_near, 2.0f)) {
    if (FloatToBf16(Bf16ToFloat(v) * s_near) == got) return true;
  }
  return false;
}

}  // namespace

int64_t CheckLayer(const LayerCase& c, const uint16_t* got, std::string* first) {
  const int columns = c.heads * kValueDim;
  // Integer codes: latent = code / 16, w = code / 64, so the dot product is exact in int32.
  std::vector<int32_t> weights(static_cast<size_t>(c.heads) * kValueDim * kLatentDim);
  for (int h = 0; h < c.heads; ++h) {
    for (int d = 0; d < kValueDim; ++d) {
      int32_t* row = &weights[(static_cast<size_t>(h) * kValueDim + d) * kLatentDim];
      for (int k = 0; k < kLatentDim; ++k) {
        row[k] = WeightCode(c.set, c.layer, c.first_head + h, k, d);
      }
    }
  }
  std::vector<int32_t> latent(kLatentDim);
  int64_t mismatches = 0;
  auto report = [&](int t, int column, uint16_t want, const char* what) {
    if (mismatches++ == 0 && first != nullptr) {
      char text[240];
      std::snprintf(text, sizeof(text),
                    "layer %d step %d set %d row %d column %d: got 0x%04x (%g), %s 0x%04x (%g)",
                    c.layer, c.step, c.set, t, c.first_head * kValueDim + column,
                    got[static_cast<size_t>(t) * columns + column],
                    Bf16ToFloat(got[static_cast<size_t>(t) * columns + column]), what, want,
                    Bf16ToFloat(want));
      *first = text;
    }
  };
  for (int t = 0; t < c.rows; ++t) {
    const uint16_t* out = got + static_cast<size_t>(t) * columns;
    if (c.lengths[t] <= 0) {
      for (int column = 0; column < columns; ++column) {
        if (out[column] != 0) report(t, column, 0, "inactive row, want +0.0");
      }
      continue;
    }
    for (int h = 0; h < c.heads; ++h) {
      for (int k = 0; k < kLatentDim; ++k) {
        latent[k] = LatentCode(c.step, c.layer, t, c.first_head + h, k);
      }
      for (int d = 0; d < kValueDim; ++d) {
        const int32_t* w = &weights[(static_cast<size_t>(h) * kValueDim + d) * kLatentDim];
        int32_t dot = 0;
        for (int k = 0; k < kLatentDim; ++k) dot += latent[k] * w[k];
        const float sum = static_cast<float>(dot) * (kLatentScale * kWeightScale);  // exact
        const uint16_t v = FloatToBf16(sum);
        const int column = h * kValueDim + d;
        const float g = GateValue(c.set, c.layer, t, c.first_head * kValueDim + column);
        const float s = 1.0f / (1.0f + std::exp(-g));
        const uint16_t want = FloatToBf16(Bf16ToFloat(v) * s);
        if (out[column] != want && !Agrees(v, s, out[column])) {
          report(t, column, want, "reference");
        }
      }
    }
  }
  return mismatches;
}

}  // namespace example

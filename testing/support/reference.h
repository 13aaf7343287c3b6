#ifndef MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_
#define MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_

// The CPU reference of docs/spec.md's math, in plain loops and independent of the kernels' code:
// the dot product accumulated exactly in double and rounded to bf16 from there (once), the
// sigmoid in double, and the FP32 sigmoids the contract allows around it; e4m3 W_UV decoded and
// dequantized to bf16 as the contract says; the e4m3 output quantized from the bf16 output.

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace mla_tail_testing {

// Element accessors (bf16 bits) in the logical shapes of the contract.
struct ReferenceInputs {
  int heads = 0;
  int q = 1;
  std::function<uint16_t(int t, int h, int k)> latent;  // [B, H, 512]
  std::function<uint16_t(int h, int k, int d)> w_uv;    // [H, 512, 128], bf16 W_UV
  // e4m3 W_UV instead of w_uv (when set): its bits and head h's scale of latent block j = k / 128.
  std::function<uint8_t(int h, int k, int d)> w_uv_fp8;
  std::function<float(int h, int j)> w_uv_scale;
  std::function<uint16_t(int t, int column)> gate;  // [B, H * 128]; empty: no gate
  std::function<int32_t(int request)> lengths;      // [B / q]
};

// The contract's bound on the FP32 sigmoid s = 1 / (1 + expf(-g)) of a bf16 gate g against the
// exact sigmoid σ(g): |s - σ| <= kSigmoidRelativeBound · σ + 2^-149. CUDA's expf is within 2 ulps
// (2^-22 relative), which reaches s scaled by exp(-g) / (1 + exp(-g)) < 1; the addition and the
// division round once each (2^-24 relative): 1.5 · 2^-22 in all, under 2^-21. The 2^-149 is
// the rounding of a subnormal s (gates from -87.3 to -88.7). Where exp(-g) exceeds FP32's range
// (g below -88.72) the FP32 formula gives s = 0: that is what the contract computes there.
inline constexpr double kSigmoidRelativeBound = 0x1p-21;

// The contract's bound on the FP32 accumulation acc of the 512 products p_k = latent · w against
// their exact sum S: |acc - S| <= kAccumulationRelativeBound · Σ_k |p_k| +
// kAccumulationAbsoluteBound. Each product of two bf16 values is exact in FP32 (8 + 8 significant
// bits), and every partial sum is at most Σ|p_k|, so each rounding of an FP32 addition is within
// 2^-24 · Σ|p_k| (511 additions in any order and grouping), and each truncation of an aligned
// term in the tensor cores' accumulation within 2^-23 · Σ|p_k| (512 products and one per group
// of 16): 2^-13 bounds both with room. A product below FP32's normal range may lose up to 2^-126
// (512 of them: 2^-117). Where every partial sum is exact in FP32 (integer data) acc = S.
inline constexpr double kAccumulationRelativeBound = 0x1p-13;
inline constexpr double kAccumulationAbsoluteBound = 0x1p-117;

struct SigmoidBounds {
  double exact = 0;   // σ(g), in double; NaN for a NaN gate
  float low = 0;      // the smallest FP32 s the contract allows
  float high = 0;     // the largest
  float nearest = 0;  // the FP32 value nearest σ(g) within [low, high]
};

SigmoidBounds AllowedSigmoids(uint16_t gate);

struct ReferenceElement {
  bool active = false;
  double acc = 0;        // the exact dot product S
  double magnitude = 0;  // Σ_k |latent · w|, the scale of the accumulation bound
  uint16_t v = 0;        // bf16(acc), rounded once from the exact value
  SigmoidBounds s;       // the sigmoids the contract allows for this element's gate; 1 without one
  uint16_t out = 0;      // the contract's output with s.nearest: bf16(float(v) * s.nearest)
};

// One output element: row t, head h, column d: active ? bf16(v * s) : +0, or without a gate
// active ? v : +0.
ReferenceElement ReferenceOutput(const ReferenceInputs& in, int t, int h, int d);

// The bf16 that e4m3 `w` of a block with scale `scale` stands for: bf16(float(w) * scale), the
// product in FP32 (rounded to nearest even), then rounded to bf16.
uint16_t DequantizeE4m3(uint8_t w, float scale);

// One (row, head) of the e4m3 output: from the 128 bf16 values the bf16 tail writes there,
// amax = max |x| (NaN if any x is NaN), scale = amax / 448, and y = e4m3(x * (448 / amax)), or
// zeros where 448 / amax is infinite (amax = 0, or below 448 / FLT_MAX); every step in FP32
// rounded to nearest even. An inactive row is all zeros with scale 0, which this gives too (its
// bf16 values are +0.0).
struct QuantizedHead {
  float scale = 0;
  std::array<uint8_t, 128> values{};
};
QuantizedHead QuantizeHead(const uint16_t* bf16_values);

// The bf16 values v' = bf16(acc') the contract allows for an FP32 sum acc' within the
// accumulation bound of the exact one: every bf16 in [low, high] (bf16 rounding is monotonic).
struct AllowedValues {
  uint16_t low = 0;
  uint16_t high = 0;
};
AllowedValues AllowedV(const ReferenceElement& ref);

// The least and the greatest output the contract allows on an active row whose reference is not
// NaN: bf16(float(v') * s') over the v' above (exact: v itself) and the s' of the sigmoid's
// bound. +0.0 for an inactive row.
struct OutputRange {
  float least = 0;
  float greatest = 0;
};
OutputRange AllowedOutputs(const ReferenceElement& ref, bool exact);

// The contract's tolerance: `got` is +0.0 exactly on inactive rows; on active rows it equals
// bf16(float(v') * s') for an FP32 s' within the sigmoid's bound (AllowedSigmoids) and
//   exact:  v' = v, the reference's bf16(acc) (every partial sum exact in FP32: integer data);
//   else:   v' any bf16 in AllowedV (any order and grouping of the FP32 sum): exactly the
//           outputs some such v' and s' give, signed zeros by their sign (a step of v' may
//           exceed a step of the output, leaving outputs between the extremes unreachable).
// NaN where the reference is NaN. On failure `why` says what was expected.
bool OutputAgrees(const ReferenceElement& ref, uint16_t got, bool exact, std::string* why);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_

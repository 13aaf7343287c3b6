#ifndef MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_
#define MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_

// The CPU reference of docs/spec.md's math, in plain loops and independent of the kernels' code:
// the dot product accumulated exactly in double and rounded to bf16 from there (once), the
// sigmoid in double, and the FP32 sigmoids the contract allows around it.

#include <cstdint>
#include <functional>
#include <string>

namespace mla_tail_testing {

// Element accessors (bf16 bits) in the logical shapes of the contract.
struct ReferenceInputs {
  int heads = 0;
  int q = 1;
  std::function<uint16_t(int t, int h, int k)> latent;  // [B, H, 512]
  std::function<uint16_t(int h, int k, int d)> w_uv;    // [H, 512, 128]
  std::function<uint16_t(int t, int column)> gate;      // [B, H * 128]
  std::function<int32_t(int request)> lengths;          // [B / q]
};

// The contract's bound on the FP32 sigmoid s = 1 / (1 + expf(-g)) of a bf16 gate g against the
// exact sigmoid σ(g): |s - σ| <= kSigmoidRelativeBound · σ + 2^-149. CUDA's expf is within 2 ulps
// (2^-22 relative), which reaches s scaled by exp(-g) / (1 + exp(-g)) < 1; the addition and the
// division round once each (2^-24 relative): 1.5 · 2^-22 in all, under 2^-21. The 2^-149 is
// the rounding of a subnormal s (gates from -87.3 to -88.7). Where exp(-g) exceeds FP32's range
// (g below -88.72) the FP32 formula gives s = 0: that is what the contract computes there.
inline constexpr double kSigmoidRelativeBound = 0x1p-21;

struct SigmoidBounds {
  double exact = 0;   // σ(g), in double; NaN for a NaN gate
  float low = 0;      // the smallest FP32 s the contract allows
  float high = 0;     // the largest
  float nearest = 0;  // the FP32 value nearest σ(g) within [low, high]
};

SigmoidBounds AllowedSigmoids(uint16_t gate);

struct ReferenceElement {
  bool active = false;
  double acc = 0;    // the exact dot product
  uint16_t v = 0;    // bf16(acc), rounded once from the exact value
  SigmoidBounds s;   // the sigmoids the contract allows for this element's gate
  uint16_t out = 0;  // the contract's output with s.nearest: bf16(float(v) * s.nearest)
};

// One output element: row t, head h, column d.
ReferenceElement ReferenceOutput(const ReferenceInputs& in, int t, int h, int d);

// The contract's tolerance: `got` is +0.0 exactly on inactive rows; on active rows it equals
// bf16(float(v') * s') for an FP32 s' within the sigmoid's bound (AllowedSigmoids) and
//   exact:  v' = v, the reference's bf16(acc) (every sum exact in FP32: integer data);
//   else:   v' within 1 bf16 ulp of v (accumulation order).
// NaN where the reference is NaN. On failure `why` says what was expected.
bool OutputAgrees(const ReferenceElement& ref, uint16_t got, bool exact, std::string* why);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_

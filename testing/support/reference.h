#ifndef MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_
#define MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_

// The CPU reference of docs/spec.md's math, in plain loops: double accumulation of the
// exact products, bf16 rounding to nearest even, FP32 sigmoid with std::exp.

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
  std::function<uint16_t(int t, int column)> gate;      // [B, H * 128]; empty: no gate
  std::function<int32_t(int request)> lengths;          // [B / q]
};

struct ReferenceElement {
  bool active = false;
  double acc = 0;    // the exact dot product
  uint16_t v = 0;    // bf16(acc)
  float s = 0;       // sigmoid(gate), FP32; 1 without a gate
  uint16_t out = 0;  // the contract's output bits
};

// One output element: row t, head h, column d: active ? bf16(v * s) : +0, or without a gate
// active ? v : +0.
ReferenceElement ReferenceOutput(const ReferenceInputs& in, int t, int h, int d);

// The contract's tolerance: `got` equals bf16(float(v') * s') for some v' within 1 bf16 ulp of
// the reference v and s' within 2 float ulps of the reference s (accumulation order, expf);
// bit-exact when `exact`; +0.0 exactly on inactive rows; NaN where the reference is NaN.
// On failure `why` says what was expected.
bool OutputAgrees(const ReferenceElement& ref, uint16_t got, bool exact, std::string* why);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_REFERENCE_H_

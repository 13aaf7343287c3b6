#include "testing/support/reference.h"

#include <cmath>
#include <cstdio>

#include "testing/support/bf16_bits.h"

namespace mla_tail_testing {

ReferenceElement ReferenceOutput(const ReferenceInputs& in, int t, int h, int d) {
  ReferenceElement r;
  r.active = in.lengths(t / in.q) > 0;
  double acc = 0;
  for (int k = 0; k < 512; ++k) {
    acc += double{Bf16ToFloat(in.latent(t, h, k))} * double{Bf16ToFloat(in.w_uv(h, k, d))};
  }
  r.acc = acc;
  r.v = FloatToBf16(static_cast<float>(acc));
  if (!in.gate) {
    r.s = 1.0f;
    r.out = r.active ? r.v : uint16_t{0};
    return r;
  }
  const float g = Bf16ToFloat(in.gate(t, h * 128 + d));
  r.s = 1.0f / (1.0f + std::exp(-g));
  r.out = r.active ? FloatToBf16(Bf16ToFloat(r.v) * r.s) : uint16_t{0};
  return r;
}

namespace {

std::string Describe(const ReferenceElement& ref, uint16_t got) {
  char text[200];
  std::snprintf(text, sizeof(text),
                "got 0x%04x (%g), reference 0x%04x (%g): v = %g (acc %.9g), s = %.9g, %s", got,
                Bf16ToFloat(got), ref.out, Bf16ToFloat(ref.out), Bf16ToFloat(ref.v), ref.acc, ref.s,
                ref.active ? "active" : "inactive");
  return text;
}

}  // namespace

bool OutputAgrees(const ReferenceElement& ref, uint16_t got, bool exact, std::string* why) {
  if (!ref.active) {
    if (got == 0) return true;
    *why = "inactive row not +0.0: " + Describe(ref, got);
    return false;
  }
  if (Bf16IsNan(ref.out)) {
    if (Bf16IsNan(got)) return true;
    *why = "expected NaN: " + Describe(ref, got);
    return false;
  }
  if (got == ref.out) return true;
  if (!exact && !Bf16IsNan(ref.v) && std::isfinite(Bf16ToFloat(ref.v))) {
    const uint16_t vs[] = {ref.v, Bf16Next(ref.v, true), Bf16Next(ref.v, false)};
    for (uint16_t v : vs) {
      float s = ref.s;
      for (int i = 0; i < 2; ++i) s = std::nextafter(s, 0.0f);
      for (int i = 0; i < 5; ++i, s = std::nextafter(s, 2.0f)) {
        if (FloatToBf16(Bf16ToFloat(v) * s) == got) return true;
      }
    }
  }
  *why = Describe(ref, got);
  return false;
}

}  // namespace mla_tail_testing

#ifndef MLA_TAIL_EXAMPLES_RUNTIME_REFERENCE_H_
#define MLA_TAIL_EXAMPLES_RUNTIME_REFERENCE_H_

// The runtime's CPU check of one layer's tail output, from the tail's contract:
//   out[t, h*128 + d] = active(t) ? bf16(bf16(sum_k latent[t,h,k] * w_uv[h,k,d]) * sigmoid(gate))
//                                 : +0.0
// with an FP32 sum and an FP32 sigmoid. A value agrees when it equals bf16(v' * s') for v' within
// 1 bf16 ulp of the reference v and s' within 2 float ulps of the reference sigmoid (the kernels
// add in another order and use the GPU's expf); inactive rows must be +0.0 exactly.

#include <cstdint>
#include <string>

namespace example {

uint16_t FloatToBf16(float value);  // round to nearest even
float Bf16ToFloat(uint16_t bits);

struct LayerCase {
  int heads = 0;       // the heads of `got`: a slice of the model's heads on one device
  int first_head = 0;  // the model's head of the slice's first head (formulas.h's indices)
  int rows = 0;        // the bucket's rows
  int step = 0;        // the formulas' step the attention stand-in wrote the latent for
  int set = 0;         // the buffer set (weights and gate)
  int layer = 0;
  const int32_t* lengths = nullptr;  // [rows], q = 1: row t is active when lengths[t] > 0
};

// Checks `got` (bf16 bits, [rows, heads * 128], row stride heads * 128: the model's heads
// first_head .. first_head + heads - 1) against the formulas of formulas.h. Returns the number of
// elements that disagree; `first` describes the first one (its column is the model's).
int64_t CheckLayer(const LayerCase& c, const uint16_t* got, std::string* first);

}  // namespace example

#endif  // MLA_TAIL_EXAMPLES_RUNTIME_REFERENCE_H_

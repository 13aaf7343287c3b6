#ifndef MLA_TAIL_TESTING_SUPPORT_FP8_DATA_H_
#define MLA_TAIL_TESTING_SUPPORT_FP8_DATA_H_

// What the e4m3 tests' W_UV holds, as a pure function of its options: the codes and block scales
// Fp8Weights (fp8.h) uploads, computed on the host without a GPU, so that CPU tests
// (testing/wrong_tails_test.cc) measure what the e4m3 suites' data can tell apart.

#include <array>
#include <cstdint>
#include <vector>

#include "testing/support/reference.h"

namespace mla_tail_testing {

enum class E4m3Values {
  kSmallIntegers,  // -2..2: with the latent's integers (up to 5), sums exact in FP32
  // -3..3: 3 has two significant bits, so with odd scales bf16(3s) is not 3 * bf16(s) and a scale
  // rounded to bf16 before the product shows. With scales of kOdd every operand is a multiple
  // of 2^-14 and every partial sum below 2^9: exact in FP32.
  kIntegersToThree,
  // +-448 once a column, subnormals, +-0, the smallest normals, -2..2. With the power-of-two
  // scales below (1/4 to 2) every dequantized value is a multiple of 2^-11 (2^-9 / 4), and with
  // latent integers up to 5 the sum of a column's |products| is below 2^13 for any codes (the
  // +-448: 448 * 2 * 5 = 4480; at most 80 codes of -2..2 a block: 80 * 2 * 5 * (1 + 1/2 + 1/4 +
  // 2) = 3000; the subnormals and smallest normals under 10): every partial sum exact in FP32.
  kEdges,
  kUniform,  // every finite code
};

enum class E4m3Scales {
  kPowersOfTwo,  // {1, 1/2, 1/4, 2}[(h + j) % 4]: the four blocks of a head each their own
  kOdd,          // values in [0.01, 0.05] that are no power of two
  kSomeZero,     // block h % 4 of head h is 0, the others powers of two
  kZeroHead,     // head 0's four blocks 0 (its values are all zeros), the others powers of two
  kNanBlock,     // head 1's block 2 NaN, the others powers of two
  kInfBlock,     // head 1's block 2 +inf (its zero codes dequantize to NaN), the others powers of 2
};

struct Fp8WeightOptions {
  E4m3Values values = E4m3Values::kSmallIntegers;
  E4m3Scales scales = E4m3Scales::kPowersOfTwo;
  bool kv_b_proj_view = false;  // e4m3 [H, 256, 512], scales [2H, 4] viewed at +4, stride 8
  int64_t row_padding = 0;      // e4m3 codes after each row of 512 (a multiple of 16; NaN codes)
  // (head, k, d) elements set to NaN codes, alternately 0x7f and 0xff.
  std::vector<std::array<int, 3>> nan_at;
  uint64_t seed = 1;
};

// The code of W_UV element (head h, latent k, column d), NaN codes of `nan_at` included.
uint8_t Fp8WeightCode(const Fp8WeightOptions& options, int h, int k, int d);

// Head h's scale of latent block j = k / 128.
float Fp8BlockScale(const Fp8WeightOptions& options, int h, int j);

// Makes `in` read this e4m3 W_UV of `heads` heads, computed on the host (w_uv cleared). The
// accessors own what they read: the result may outlive `options`.
void ApplyHostFp8Weights(int heads, const Fp8WeightOptions& options, ReferenceInputs* in);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_FP8_DATA_H_

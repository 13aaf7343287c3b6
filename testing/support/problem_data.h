#ifndef MLA_TAIL_TESTING_SUPPORT_PROBLEM_DATA_H_
#define MLA_TAIL_TESTING_SUPPORT_PROBLEM_DATA_H_

// What a test problem holds, as a pure function of its options: the values Problem (problem.h)
// fills on the GPU, and the same values computed on the host without a GPU, so that CPU tests
// (testing/wrong_tails_test.cc) measure what the GPU suites' data can tell apart.

#include <cstdint>
#include <vector>

#include "mla_tail/mla/tail_args.h"
#include "testing/support/reference.h"
#include "testing/support/test_values.h"

namespace mla_tail_testing {

struct ProblemOptions {
  mla_tail::TailShape shape;
  Values data = Values::kRoundingIntegers;  // latent and W_UV
  Values gates = Values::kGates;
  bool kv_b_proj_view = false;    // W_UV as the V half of a [H, 256, 512] kv_b_proj
  int64_t row_padding = 0;        // elements added to the latent, gate and output row strides
                                  // (to the gate's 16 more where it is not 0)
  int64_t w_row_padding = 0;      // elements added to W_UV's row stride of 512 (a multiple of 8)
  int inactive_every = 3;         // request r is inactive when r % n == 1 (n = 0 or 1: none); its
                                  // length is 0 and its latent and gate rows hold NaN
  bool negative_lengths = false;  // inactive requests get length -7 instead of 0
  // NaN in one active row's latent (one head) and in one W_UV column; +inf, -inf and NaN gates in
  // two active rows: what the contract says an active row propagates.
  bool special_values = false;
  int guard_rows = 16;  // NaN rows after the output that must stay NaN
  bool gated = true;    // false: buffers() hold no gate (out = bf16(v))
  uint64_t seed = 1;
};

// The seeds of the three filled tensors.
inline uint64_t LatentSeed(const ProblemOptions& o) { return o.seed * 4; }
inline uint64_t WeightSeed(const ProblemOptions& o) { return o.seed * 4 + 1; }
inline uint64_t GateSeed(const ProblemOptions& o) { return o.seed * 4 + 2; }

// One request's length: 1 + r when active, else 0 (or -7).
std::vector<int32_t> ProblemLengths(const ProblemOptions& options);

// An element set apart from the fill (ProblemOptions::special_values), in logical indices.
struct SpecialValue {
  enum Tensor { kLatent, kWeight, kGate } tensor;
  int64_t i, j, k;  // latent (t, h, k), W_UV (h, k, d), gate (t, column, unused)
  uint16_t bits;
};
std::vector<SpecialValue> SpecialValues(const ProblemOptions& options);

// The rows that hold special values (empty unless special_values).
std::vector<int> SpecialRows(const ProblemOptions& options);

// The problem's inputs as Problem::Create fills them, computed on the host (every element, so
// for problems of a test's size). The accessors own what they read: the result may outlive
// `options`.
ReferenceInputs HostReferenceInputs(const ProblemOptions& options);

// Rows worth checking: all of a small batch; tile edges, the ends, special rows and a few random
// ones else.
std::vector<int> SampleRows(const ProblemOptions& options, int random_rows = 4);

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_PROBLEM_DATA_H_

#ifndef MLA_TAIL_BENCH_OUTPUT_CHECK_H_
#define MLA_TAIL_BENCH_OUTPUT_CHECK_H_

// The benchmarks' check of what they time: each layer's output poisoned (NaN) before a timed
// run, and a sample of it compared with the CPU reference after (testing/support/reference.h).

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/status.h"
#include "bench/bench_util.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/reference.h"

namespace mla_tail_bench {

// The CPU reference's view of layer `index` of MakeLayers(shape, ...): the same test values.
mla_tail_testing::ReferenceInputs LayerReferenceInputs(const mla_tail::TailShape& shape, int index);

// Fills every layer's output with NaN (in stream order; not timed when done before a timing).
absl::Status PoisonOutputs(const std::vector<Layer>& layers, cudaStream_t stream);

// Compares a sample of the first and last layers' outputs with the reference: rows 0, the last
// and one between, and at most 256 columns of each, spread over the heads; v within the
// contract's accumulation bound (the uniform data's sums are not exact in FP32, and may be added
// in any order). Synchronizes `stream` first. An error
// names the first mismatches.
// `e4m3_weight`: the layers ran with the e4m3 W_UV of MakeFp8Layers. `live_rows` >= 0: only rows
// below it were computed (a live row count, or a tail of fewer rows over the layers' buffers),
// and rows at and past it must hold the poison whole. `gated` false: the tails ran without the
// layers' gates.
absl::Status CheckOutputs(const mla_tail::TailShape& shape, const std::vector<Layer>& layers,
                          cudaStream_t stream, bool e4m3_weight = false, int live_rows = -1,
                          bool gated = true);

// CheckOutputs for the e4m3 modes (`weight`: e4m3 W_UV from `fp8`, `output`: the e4m3 output
// in `fp8`). A bf16 output as CheckOutputs checks it, against the reference with the layers'
// e4m3 W_UV where `weight`; an e4m3 output dequantized (value times its (row, head) scale)
// within half an e4m3 step of the bf16 outputs the contract allows (reference.h's
// AllowedOutputs: v within the accumulation bound, s within the sigmoid's).
absl::Status CheckFp8Outputs(const mla_tail::TailShape& shape, const std::vector<Layer>& layers,
                             const std::vector<Fp8Layer>& fp8, bool weight, bool output,
                             cudaStream_t stream);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_OUTPUT_CHECK_H_

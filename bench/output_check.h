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
// and one between, and at most 256 columns of each, spread over the heads; v within 1 bf16 ulp
// (the uniform data's sums may be added in any order). Synchronizes `stream` first. An error
// names the first mismatches.
absl::Status CheckOutputs(const mla_tail::TailShape& shape, const std::vector<Layer>& layers,
                          cudaStream_t stream);

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_OUTPUT_CHECK_H_

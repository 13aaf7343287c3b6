#include "demo/check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mla/internal/cuda_status.h"
#include "testing/support/reference.h"

namespace mla_tail_demo {

absl::StatusOr<int> CheckLayer(const Config& c, const Model& m, const Batch& batch, int bucket,
                               int step, int layer, std::vector<uint16_t>* got, CheckLog* log) {
  const int64_t width = m.width();
  const int rows_read = std::min(bucket + kRowsPastBucket, m.bmax);
  MLA_RETURN_IF_CUDA_ERROR(cudaMemcpy(got->data(), m.output_of(step % 2, layer),
                                      rows_read * width * 2, cudaMemcpyDeviceToHost),
                           "download output");
  const std::vector<uint16_t>& out = *got;
  for (int t = 0; t < rows_read; ++t) {
    const bool active = t < batch.rows && batch.lengths[t / c.q] > 0;
    for (int64_t column = 0; column < width; ++column) {
      const uint16_t bits = out[t * width + column];
      if (t >= bucket ? bits == 0xffff : (active ? bits != 0xffff : bits == 0)) continue;
      log->Report(absl::StrFormat("layer %d row %d column %d: 0x%04x (rows %d, bucket %d, %s)",
                                  layer, t, column, bits, batch.rows, bucket,
                                  active ? "active" : "inactive"));
      break;
    }
  }

  const std::vector<int> rows =
      SampleRows(batch, c.q, c.check_rows, Seed(c.seed, Data::kSample, step, layer));
  const mla_tail_testing::ReferenceInputs in =
      StepInputs(c.heads, c.q, c.seed, step, layer, batch.lengths);
  const int pairs = static_cast<int>(rows.size()) * c.heads;
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next++; i < pairs; i = next++) {
      const int t = rows[i / c.heads], h = i % c.heads;
      for (int d = 0; d < kD; ++d) {
        const mla_tail_testing::ReferenceElement ref =
            mla_tail_testing::ReferenceOutput(in, t, h, d);
        std::string why;
        if (!mla_tail_testing::OutputAgrees(ref, out[t * width + h * kD + d], /*exact=*/false,
                                            &why)) {
          log->Report(
              absl::StrCat("layer ", layer, " row ", t, " head ", h, " column ", d, ": ", why));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  const int count = std::clamp<int>(std::thread::hardware_concurrency(), 1, 16);
  for (int i = 0; i < std::min(count, pairs); ++i) threads.emplace_back(work);
  for (std::thread& thread : threads) thread.join();
  return static_cast<int>(rows.size());
}

}  // namespace mla_tail_demo

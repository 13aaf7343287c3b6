#include "demo/step.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "mla_tail/mla/padding.h"
#include "testing/support/fill.h"
#include "testing/support/test_values.h"

namespace mla_tail_demo {

using mla_tail::TailGraphSet;
using mla_tail_testing::Values;

absl::StatusOr<StepTimes> RunStep(const Config& c, const Model& m, const Batch& batch, int bucket,
                                  int step, const std::vector<int>& checked_layers,
                                  TailGraphSet* set, const Cuda& cuda) {
  const int slot = step % 2;
  const cudaStream_t stream = cuda.stream;
  for (int layer : checked_layers) {
    MLA_RETURN_IF_CUDA_ERROR(
        cudaMemsetAsync(m.output_of(slot, layer), 0xff, m.row_elements() * 2, stream),
        "poison output");
  }
  for (int layer = 0; layer < c.layers; ++layer) {
    MLA_RETURN_IF_CUDA_ERROR(
        FillTestValues({m.latent_of(slot, layer), batch.rows, c.heads, kL, c.heads * kL, kL},
                       Seed(c.seed, Data::kLatent, step, layer), Values::kUniform, stream),
        "fill latent");
    MLA_RETURN_IF_CUDA_ERROR(
        FillTestValues({m.gate_of(slot, layer), batch.rows, 1, m.width(), m.width(), 0},
                       Seed(c.seed, Data::kGate, step, layer), Values::kUniformGates, stream),
        "fill gate");
  }
  int32_t* lengths = m.lengths[slot].as<int32_t>();
  MLA_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(lengths, batch.lengths.data(), batch.lengths.size() * sizeof(int32_t),
                      cudaMemcpyHostToDevice, stream),
      "upload lengths");
  MLA_RETURN_IF_ERROR(mla_tail::ZeroPaddingLengths(lengths, batch.rows, bucket, c.q, stream));

  StepTimes times;
  MLA_RETURN_IF_CUDA_ERROR(cudaEventRecord(cuda.start, stream), "record start");
  for (int layer = 0; layer < c.layers; ++layer) {
    MLA_RETURN_IF_ERROR(set->SetLayer(layer, m.Buffers(slot, layer)));
    const absl::Time begin = absl::Now();
    MLA_RETURN_IF_ERROR(set->Replay(layer, batch.rows, stream));
    times.host_us += absl::ToDoubleMicroseconds(absl::Now() - begin);
  }
  MLA_RETURN_IF_CUDA_ERROR(cudaEventRecord(cuda.stop, stream), "record stop");
  MLA_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), absl::StrCat("step ", step));
  MLA_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&times.gpu_ms, cuda.start, cuda.stop), "elapsed");
  return times;
}

}  // namespace mla_tail_demo

#include "demo/data.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <set>
#include <utility>

#include "mla/internal/cuda_status.h"
#include "testing/support/test_values.h"

namespace mla_tail_demo {

using mla_tail_testing::SplitMix64;
using mla_tail_testing::TestValue;
using mla_tail_testing::Values;

uint64_t Seed(uint64_t seed, Data data, uint64_t step, uint64_t index) {
  return SplitMix64(SplitMix64(SplitMix64(seed * 8 + static_cast<uint64_t>(data)) ^ step) ^ index);
}

mla_tail_testing::ReferenceInputs StepInputs(int heads, int q, uint64_t seed, int step, int layer,
                                             std::vector<int32_t> lengths) {
  const uint64_t latent_seed = Seed(seed, Data::kLatent, step, layer);
  const uint64_t w_seed = Seed(seed, Data::kWeights, 0, layer);
  const uint64_t gate_seed = Seed(seed, Data::kGate, step, layer);
  const uint64_t width = static_cast<uint64_t>(heads) * kD;
  mla_tail_testing::ReferenceInputs in;
  in.heads = heads;
  in.q = q;
  in.latent = [=](int t, int h, int k) {
    return TestValue(latent_seed, (static_cast<uint64_t>(t) * heads + h) * kL + k,
                     Values::kUniform);
  };
  in.w_uv = [=](int h, int k, int d) {
    return TestValue(w_seed, (static_cast<uint64_t>(h) * kD + d) * kL + k, Values::kUniform);
  };
  in.gate = [=](int t, int column) {
    return TestValue(gate_seed, static_cast<uint64_t>(t) * width + column, Values::kUniformGates);
  };
  in.lengths = [lengths = std::move(lengths)](int request) { return lengths[request]; };
  return in;
}

std::vector<int32_t> DrawLengths(uint64_t seed, int step, int requests) {
  std::vector<int32_t> lengths(requests);
  for (int r = 0; r < requests; ++r) {
    const uint64_t x = Seed(seed, Data::kLengths, step, r);
    lengths[r] = x % 5 == 0 ? 0 : 1 + static_cast<int32_t>((x >> 8) % 4096);
  }
  return lengths;
}

Batch DrawBatch(const Config& c, int step, int previous_requests) {
  const uint64_t x = Seed(c.seed, Data::kBatch, step, 0);
  const int max_requests = c.max_rows / c.q;
  int requests = 1 + static_cast<int>(x % max_requests);
  if (previous_requests > 0) {
    const int mode = static_cast<int>((x >> 32) % 4);
    if (mode == 0) requests = previous_requests;
    const int drift = static_cast<int>((x >> 40) % 7) - 3;
    if (mode == 1) requests = std::clamp(previous_requests + drift, 1, max_requests);
  }
  return Batch{requests * c.q, DrawLengths(c.seed, step, requests)};
}

std::vector<int> SampleRows(const Batch& batch, int q, int count, uint64_t seed) {
  std::set<int> rows = {batch.rows - 1};
  const int requests = static_cast<int>(batch.lengths.size());
  for (int i = 0; i < requests; ++i) {
    const int r = static_cast<int>((seed + i) % requests);
    if (batch.lengths[r] != 0) continue;
    rows.insert(r * q + static_cast<int>((seed >> 32) % q));
    break;
  }
  for (uint64_t i = 0; static_cast<int>(rows.size()) < std::min(count, batch.rows); ++i) {
    rows.insert(static_cast<int>(SplitMix64(seed + i) % batch.rows));
  }
  return {rows.begin(), rows.end()};
}

absl::Status Model::Allocate() {
  MLA_RETURN_IF_ERROR(w_uv.Reset(static_cast<size_t>(layers) * heads * kD * kL * 2));
  for (int slot = 0; slot < 2; ++slot) {
    MLA_RETURN_IF_ERROR(latent[slot].Reset(layers * latent_elements() * 2));
    MLA_RETURN_IF_ERROR(gate[slot].Reset(layers * row_elements() * 2));
    MLA_RETURN_IF_ERROR(output[slot].Reset(layers * row_elements() * 2));
    MLA_RETURN_IF_ERROR(lengths[slot].Reset(static_cast<size_t>(bmax / q) * sizeof(int32_t)));
    // The kernels read the padding rows' latent and gate (their lengths make the output
    // +0.0); NaN there, never garbage, keeps initcheck's view defined and shows the rows
    // are ignored.
    for (const mla_tail_testing::DeviceMemory* m : {&latent[slot], &gate[slot]}) {
      MLA_RETURN_IF_CUDA_ERROR(cudaMemset(m->get(), 0xff, m->bytes()), "poison activations");
    }
  }
  // cudaMemset of device memory returns before it is done, on the legacy stream, which the
  // demo's non-blocking stream does not wait for: done before any step's fill.
  MLA_RETURN_IF_CUDA_ERROR(cudaDeviceSynchronize(), "poison activations");
  return absl::OkStatus();
}

mla_tail::TailBuffers Model::Buffers(int s, int l) const {
  auto bf16 = [](uint16_t* bits) { return reinterpret_cast<mla_tail::bf16*>(bits); };
  return mla_tail::CompactBuffers({heads, bmax, q}, bf16(latent_of(s, l)), bf16(w_uv_of(l)),
                                  bf16(gate_of(s, l)), lengths[s].as<int32_t>(),
                                  bf16(output_of(s, l)));
}

}  // namespace mla_tail_demo

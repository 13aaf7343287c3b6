#ifndef MLA_TAIL_DEMO_DATA_H_
#define MLA_TAIL_DEMO_DATA_H_

// What the decode demo computes on: every value is drawn from the run's seed, so the device fills
// and the CPU reference derive the same data independently. Each step draws a batch (its rows
// and one length per request); the model lives on the device in two activation slots that the
// steps alternate between, so every layer's pointers change every step.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "demo/config.h"
#include "mla_tail/mla/tail_args.h"
#include "testing/support/problem.h"
#include "testing/support/reference.h"

namespace mla_tail_demo {

// Seeds of everything drawn, derived the same way by the fills and the reference.
enum class Data : uint64_t { kWeights = 1, kLatent, kGate, kBatch, kLengths, kSample };

uint64_t Seed(uint64_t seed, Data data, uint64_t step, uint64_t index);

// The inputs of layer `layer` at step `step`, computed element by element from the seeds and
// logical indices the fills used (W_UV does not depend on the step).
mla_tail_testing::ReferenceInputs StepInputs(int heads, int q, uint64_t seed, int step, int layer,
                                             std::vector<int32_t> lengths);

// One length per request: about one in five finished (0), the others 1..4096.
std::vector<int32_t> DrawLengths(uint64_t seed, int step, int requests);

struct Batch {
  int rows = 0;                  // q * requests
  std::vector<int32_t> lengths;  // one per request
};

// A step's batch: a quarter of the steps repeat the previous size, a quarter drift by a few
// requests, the rest draw anew from [1, max_rows / q] requests (mostly another bucket).
Batch DrawBatch(const Config& c, int step, int previous_requests);

// Rows compared with the reference: the last row, a row of a finished request when there is
// one, then random rows up to `count`.
std::vector<int> SampleRows(const Batch& batch, int q, int count, uint64_t seed);

// W_UV of every layer ([H, 128, 512] each), and two slots of activations: per layer a latent
// [Bmax, H, 512], a gate and an output [Bmax, H * 128], compact, and per slot one lengths array
// of Bmax / q requests.
struct Model {
  Model(const Config& c, int largest_bucket)
      : heads(c.heads), layers(c.layers), bmax(largest_bucket), q(c.q) {}
  const int heads, layers, bmax, q;
  mla_tail_testing::DeviceMemory w_uv, latent[2], gate[2], output[2], lengths[2];

  int64_t width() const { return int64_t{heads} * kD; }
  int64_t latent_elements() const { return int64_t{bmax} * heads * kL; }  // per layer
  int64_t row_elements() const { return bmax * width(); }  // the gate and output of a layer

  absl::Status Allocate();
  // A layer's tensors as bf16 bits (what the fills write and the check reads).
  uint16_t* w_uv_of(int l) const { return w_uv.as<uint16_t>() + int64_t{l} * heads * kD * kL; }
  uint16_t* latent_of(int s, int l) const {
    return latent[s].as<uint16_t>() + l * latent_elements();
  }
  uint16_t* gate_of(int s, int l) const { return gate[s].as<uint16_t>() + l * row_elements(); }
  uint16_t* output_of(int s, int l) const { return output[s].as<uint16_t>() + l * row_elements(); }

  mla_tail::TailBuffers Buffers(int s, int l) const;
};

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_DATA_H_

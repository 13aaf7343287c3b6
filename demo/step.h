#ifndef MLA_TAIL_DEMO_STEP_H_
#define MLA_TAIL_DEMO_STEP_H_

// One decode step of the demo on the device: the step's activations written into its slot,
// then every layer pointed at the slot and replayed.

#include <cuda_runtime.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "demo/config.h"
#include "demo/data.h"
#include "mla/internal/cuda_status.h"
#include "mla_tail/graph/tail_graph_set.h"

namespace mla_tail_demo {

// The stream of the loop and the events that time a step's replays.
struct Cuda {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Cuda() = default;
  Cuda(const Cuda&) = delete;
  Cuda& operator=(const Cuda&) = delete;
  ~Cuda() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  absl::Status Create() {
    MLA_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    MLA_RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "event");
    return mla_tail::internal::CudaStatus(cudaEventCreate(&stop), "event");
  }
};

struct StepTimes {
  double host_us = 0;  // Replay host calls, all layers
  // From before the first replay to after the last, on the stream: the host's SetLayer and
  // Replay calls pace it (nothing holds the stream while they enqueue), so it is no kernel time.
  float gpu_ms = 0;
};

// One step on slot step % 2: poison the checked layers' outputs, fill the activations, upload
// the lengths and zero the padding requests', then point every layer at the slot and replay it.
absl::StatusOr<StepTimes> RunStep(const Config& c, const Model& m, const Batch& batch, int bucket,
                                  int step, const std::vector<int>& checked_layers,
                                  mla_tail::TailGraphSet* set, const Cuda& cuda);

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_STEP_H_

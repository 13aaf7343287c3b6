#ifndef MLA_TAIL_DEMO_DECODE_LOOP_H_
#define MLA_TAIL_DEMO_DECODE_LOOP_H_

// The decode demo on the GPU: a graph set for the model's layers, the model's weights, then the
// decode loop, each step replayed, checked and reported.

#include "absl/status/status.h"
#include "demo/config.h"

namespace mla_tail_demo {

// Fails on a mismatch, on an instantiation after warm-up, or on memory growth after warm-up.
absl::Status RunDemo(const Config& c);

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_DECODE_LOOP_H_

#ifndef MLA_TAIL_DEMO_CONFIG_H_
#define MLA_TAIL_DEMO_CONFIG_H_

// The decode demo's settings (its flags, parsed and checked in decode_demo.cc) and the data
// layout every part of it shares.

#include <cstdint>
#include <vector>

#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail_demo {

inline constexpr int kL = mla_tail::kLatentDim;
inline constexpr int kD = mla_tail::kValueDim;
// Instantiations and memory growth after this many steps fail the run.
inline constexpr int kWarmUpSteps = 2;

struct Config {
  int heads = 0, layers = 0, q = 1, steps = 0, max_rows = 0, check_layers = 0, check_rows = 0;
  int print_every = 1, max_rss_growth_mib = 0;
  uint64_t seed = 0;
  std::vector<int> buckets;
  mla_tail::TailPath path = mla_tail::TailPath::kAuto;
  bool capture_all = true;
  bool watch_memory = true;
};

}  // namespace mla_tail_demo

#endif  // MLA_TAIL_DEMO_CONFIG_H_

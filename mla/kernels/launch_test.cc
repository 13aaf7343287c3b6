// Every launch the library can plan is of a kernel Create loads, within the dynamic shared memory
// it allows that kernel, and inside CUDA's grid limits: every fused kernel (forced, and the rule's
// choice) in every form (bf16 and e4m3 W_UV and output, gated and not) over heads 1-128, rows
// 1-65536 and several multiprocessor counts. LoadKernel reports what it would load through a test
// hook instead of asking CUDA, so this runs without a GPU.

#include "mla/kernels/launch.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "mla/internal/fault_hooks.h"
#include "mla/kernels/params.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {
namespace {

TEST(LaunchTest, EveryPlannedLaunchIsLoadedWithItsSharedMemory) {
  std::map<const void*, size_t> loaded;
  {
    FaultHooks hooks;
    hooks.kernel_loaded = [&loaded](const void* kernel, size_t smem_bytes) {
      loaded[kernel] = smem_bytes;
    };
    ScopedFaultHooks scoped(std::move(hooks));
    ASSERT_EQ(LoadTailKernels(), cudaSuccess);
  }
  ASSERT_FALSE(loaded.empty());

  // Any non-null address: planning reads no buffer, only which are present.
  const auto some = [](uintptr_t a) { return reinterpret_cast<void*>(a); };
  std::vector<int> rows;
  for (int r = 1; r <= 130; ++r) rows.push_back(r);
  for (int r : {255, 256, 257, 511, 512, 513, 1000, 1023, 1024, 1025, 2047, 2048, 4095, 4096, 8191,
                8192, 32768, 65535, 65536}) {
    rows.push_back(r);
  }
  std::vector<FusedKernel> kernels = {FusedKernel::kAuto};
  for (FusedKernel k : kFusedKernels) kernels.push_back(k);
  int64_t plans = 0;
  for (int multiprocessors : {132, 114, 78, 1, 0}) {
    for (bool e4m3_weight : {false, true}) {
      for (bool e4m3_output : {false, true}) {
        for (bool gated : {true, false}) {
          for (int heads : {1, 2, 3, 7, 8, 12, 16, 31, 32, 48, 49, 63, 64, 96, 127, 128}) {
            for (int r : rows) {
              FusedTailParams p = {};
              p.heads = heads;
              p.rows = r;
              p.q = 1;
              p.latent = static_cast<const bf16*>(some(0x1000));
              if (e4m3_weight) {
                p.w_uv_fp8 = static_cast<const fp8_e4m3*>(some(0x2000));
              } else {
                p.w_uv = static_cast<const bf16*>(some(0x2000));
              }
              if (e4m3_output) {
                p.output_fp8 = static_cast<fp8_e4m3*>(some(0x3000));
              } else {
                p.output = static_cast<bf16*>(some(0x3000));
              }
              p.gate = gated ? static_cast<const bf16*>(some(0x4000)) : nullptr;
              for (FusedKernel kernel : kernels) {
                SCOPED_TRACE(absl::StrCat(FusedKernelName(kernel), " heads ", heads, " rows ", r,
                                          " multiprocessors ", multiprocessors, " e4m3 W_UV ",
                                          e4m3_weight, " e4m3 output ", e4m3_output, " gated ",
                                          gated));
                KernelLaunch launch;
                ASSERT_EQ(PlanFusedKernel(p, kernel, multiprocessors, &launch), cudaSuccess);
                ++plans;
                const auto found = loaded.find(launch.function);
                ASSERT_NE(found, loaded.end()) << "a kernel LoadTailKernels does not load";
                // Up to 48 KB a block needs no allowance (CUDA's default); beyond, the load's.
                ASSERT_LE(launch.smem_bytes, std::max<size_t>(found->second, 48 * 1024));
                ASSERT_GE(launch.grid.x, 1u);
                ASSERT_GE(launch.grid.y, 1u);
                ASSERT_GE(launch.grid.z, 1u);
                ASSERT_LE(launch.grid.y, 65535u);
                ASSERT_LE(launch.grid.z, 65535u);
                ASSERT_LE(launch.block.x * launch.block.y * launch.block.z, 1024u);
              }
            }
          }
        }
      }
    }
  }
  RecordProperty("plans", static_cast<int>(plans));
}

}  // namespace
}  // namespace mla_tail::internal

// The one launcher and loader of the library's kernels; which fused kernel runs for a shape (the
// one place that maps FusedKernel and a shape to a launch, for the eager launch and for graph
// nodes); and the one place that loads every kernel of the tail.

#include <cuda.h>
#include <cuda_runtime.h>

#include <atomic>
#include <initializer_list>

#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/sm90.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {
namespace {

// Sets `kernel`'s `attribute` to `value` on the current device, through the driver's
// cuFuncSetAttribute: cudaFuncSetAttribute resets the thread's pending runtime error, which may be
// the caller's.
cudaError_t SetFunctionAttribute(const void* kernel, CUfunction_attribute attribute, int value) {
  using SetAttribute = CUresult (*)(CUfunction, CUfunction_attribute, int);
  static const SetAttribute set_attribute = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuFuncSetAttribute", &entry, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return SetAttribute{nullptr};
    }
    return reinterpret_cast<SetAttribute>(entry);
  }();
  if (set_attribute == nullptr) return cudaErrorSymbolNotFound;
  cudaFunction_t function = nullptr;
  const cudaError_t e = cudaGetFuncBySymbol(&function, kernel);
  if (e != cudaSuccess) return e;
  // The driver's codes are the runtime's for every error this can return (out of memory, sticky
  // errors, an invalid value).
  return static_cast<cudaError_t>(
      set_attribute(reinterpret_cast<CUfunction>(function), attribute, value));
}

}  // namespace

cudaError_t LaunchKernel(const KernelLaunch& launch, const void* params, cudaStream_t stream,
                         bool pdl) {
  cudaLaunchAttribute attributes[1];
  attributes[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = launch.grid;
  config.blockDim = launch.block;
  config.dynamicSmemBytes = launch.smem_bytes;
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = 1;
  void* arguments[] = {const_cast<void*>(params)};
  return cudaLaunchKernelExC(&config, launch.function, arguments);
}

cudaError_t LoadKernel(const void* kernel, size_t smem_bytes) {
  cudaFuncAttributes attributes;
  const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
  // The e4m3-output kernels whose blocks share a head's amax run in clusters: the load-balancing
  // policy, which lets the hardware balance a cluster's blocks over the multiprocessors, measured
  // faster than the default (docs/design.md, "How each kernel writes the e4m3 output"). It is a
  // preference: where a driver refuses it, the kernel runs with the default policy (the driver
  // call leaves the runtime's error state alone).
  if (e == cudaSuccess && attributes.requiredClusterWidth > 1) {
    (void)SetFunctionAttribute(kernel, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
                               CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING);
  }
  if (e != cudaSuccess || smem_bytes <= kSharedMemoryWithoutOptIn) return e;
  return SetFunctionAttribute(kernel, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              static_cast<int>(smem_bytes));
}

cudaError_t MultiprocessorCount(int device, int* count) {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices];
  if (device >= 0 && device < kDevices &&
      (*count = cached[device].load(std::memory_order_relaxed)) > 0) {
    return cudaSuccess;
  }
  const cudaError_t e = cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess && device >= 0 && device < kDevices) {
    cached[device].store(*count, std::memory_order_relaxed);
  }
  return e;
}

FusedKernel ResolveFusedKernel(FusedKernel kernel, int heads, int rows, int multiprocessors,
                               WeightType weight, OutputType output) {
  return kernel != FusedKernel::kAuto
             ? kernel
             : DispatchFusedKernel(heads, rows, multiprocessors, weight, output);
}

cudaError_t PlanFusedKernel(const FusedTailParams& p, FusedKernel kernel, int multiprocessors,
                            KernelLaunch* launch) {
  const WeightType weight = p.w_uv_fp8 != nullptr ? WeightType::kE4m3 : WeightType::kBf16;
  const OutputType output = p.output_fp8 != nullptr ? OutputType::kE4m3 : OutputType::kBf16;
  const FusedKernel resolved =
      ResolveFusedKernel(kernel, p.heads, p.rows, multiprocessors, weight, output);
  // The one place the gate's presence and the weight and output types pick a kernel's form.
  const bool gated = p.gate != nullptr;
  return WithTypes(weight, output, [&](auto w, auto o) {
    constexpr WeightType kW = decltype(w)::value;
    constexpr OutputType kO = decltype(o)::value;
    if (resolved == FusedKernel::kPersistent128x128) {
      *launch = PlanPersistent128x128<kW, kO>(p.heads, p.rows, multiprocessors, gated);
      return cudaSuccess;
    }
    if (resolved == FusedKernel::kLatentSplit) {
      *launch = PlanLatentSplit<kW, kO>(p.heads, p.rows, gated);
      return cudaSuccess;
    }
    if (IsTileKernel(resolved)) return PlanTile<kW, kO>(p.heads, p.rows, resolved, gated, launch);
    *launch = PlanColumnSplit<kW, kO>(p.heads, p.rows, multiprocessors, gated);
    return cudaSuccess;
  });
}

cudaError_t LoadTailKernels() {
  for (cudaError_t (*load)() : {LoadColumnSplit, LoadLatentSplit, LoadTileKernels,
                                LoadPersistent128x128, LoadBmmGate, LoadBmmPointers}) {
    const cudaError_t e = load();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace mla_tail::internal

// The one launcher and loader of the library's kernels; which fused kernel runs for a shape (the
// one place that maps FusedKernel and a shape to a launch, for the eager launch and for graph
// nodes); and the one place that loads every kernel of the tail.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <initializer_list>

#include "mla/internal/fault_hooks.h"
#include "mla/kernels/fused_kernels.h"
#include "mla/kernels/launch.h"
#include "mla/kernels/sm90.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {
namespace {

// The driver function `name` of at least `version`, or null where the driver has none.
void* DriverEntryPoint(const char* name, int version) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return entry;
}

// Sets `kernel`'s `attribute` to `value` in the current context, through the driver's
// cuFuncSetAttribute (cudaFuncSetAttribute resets the thread's pending runtime error, which may
// be the caller's), and for the kernel on the current device (cuKernelSetAttribute), which holds
// in every context of the device, so that a context where CUDA loads the kernel later (lazy
// loading: a context of the caller's, a green context) has it too. The current context's
// setting decides the result; the device-wide one is a best effort where the driver has it.
cudaError_t SetFunctionAttribute(const void* kernel, CUfunction_attribute attribute, int value) {
  using SetAttribute = CUresult (*)(CUfunction, CUfunction_attribute, int);
  using SetKernelAttribute = CUresult (*)(CUfunction_attribute, int, CUkernel, CUdevice);
  static const SetAttribute set_attribute =
      reinterpret_cast<SetAttribute>(DriverEntryPoint("cuFuncSetAttribute", 12000));
  static const SetKernelAttribute set_kernel_attribute =
      reinterpret_cast<SetKernelAttribute>(DriverEntryPoint("cuKernelSetAttribute", 12000));
  if (set_attribute == nullptr) return cudaErrorSymbolNotFound;
  cudaFunction_t function = nullptr;
  const cudaError_t e = cudaGetFuncBySymbol(&function, kernel);
  if (e != cudaSuccess) return e;
  // The driver's codes are the runtime's for every error this can return (out of memory, sticky
  // errors, an invalid value).
  const cudaError_t set = static_cast<cudaError_t>(
      set_attribute(reinterpret_cast<CUfunction>(function), attribute, value));
  if (set != cudaSuccess || set_kernel_attribute == nullptr) return set;
  int device = -1;
  cudaKernel_t handle = nullptr;
  if (cudaGetDevice(&device) == cudaSuccess && cudaGetKernel(&handle, kernel) == cudaSuccess) {
    (void)set_kernel_attribute(attribute, value, reinterpret_cast<CUkernel>(handle),
                               static_cast<CUdevice>(device));
  }
  return cudaSuccess;
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
  if (const FaultHooks& hooks = ActiveFaultHooks(); hooks.kernel_loaded) {
    hooks.kernel_loaded(kernel, smem_bytes);
    return cudaSuccess;
  }
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
  multiprocessors = std::max(multiprocessors, 1);  // the plans divide by it
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

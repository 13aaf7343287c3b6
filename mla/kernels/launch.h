#ifndef MLA_TAIL_MLA_KERNELS_LAUNCH_H_
#define MLA_TAIL_MLA_KERNELS_LAUNCH_H_

// Choosing, launching and loading the kernels (host code). Launches validate nothing: the
// callers (mla/tail.h, graph/) have checked every shape, stride and pointer.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "mla/kernels/params.h"
#include "mla_tail/mla/dispatch.h"

namespace mla_tail::internal {

// One kernel launch: what cudaLaunchKernelEx takes, and what a graph's kernel node holds. The
// kernel's only argument is its params struct.
struct KernelLaunch {
  const void* function = nullptr;
  dim3 grid;
  dim3 block;
  unsigned int smem_bytes = 0;
};

// Enqueues `launch` with `*params` as the kernel's argument (cudaLaunchKernelEx): every launch
// of the library's kernels. With `pdl` the launch carries the programmatic-stream-serialization
// attribute: it may begin while the kernel before it in the stream runs (the kernel waits
// before reading what upstream kernels write), and captured into a graph its edge is
// programmatic.
inline cudaError_t LaunchKernel(const KernelLaunch& launch, const void* params, cudaStream_t stream,
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

// LaunchKernel for a kernel function and its params struct.
template <typename Params>
cudaError_t LaunchWithPdl(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem_bytes,
                          cudaStream_t stream, bool pdl, const Params& params) {
  KernelLaunch launch;
  launch.function = reinterpret_cast<const void*>(kernel);
  launch.grid = grid;
  launch.block = block;
  launch.smem_bytes = static_cast<unsigned int>(smem_bytes);
  return LaunchKernel(launch, &params, stream, pdl);
}

// Lets `kernel` use `bytes` of dynamic shared memory on the current device, through the
// driver's cuFuncSetAttribute: cudaFuncSetAttribute resets the thread's pending runtime error,
// which may be the caller's.
inline cudaError_t SetMaxDynamicSharedMemory(const void* kernel, int bytes) {
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
  return set_attribute(reinterpret_cast<CUfunction>(function),
                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes) == CUDA_SUCCESS
             ? cudaSuccess
             : cudaErrorInvalidValue;
}

// Loads `kernel` on the current device now (cudaFuncGetAttributes makes the runtime load it)
// and lets it use `smem_bytes` of dynamic shared memory (more than 48 KB needs an opt-in). CUDA
// otherwise loads each kernel at its first launch or graph instantiation; loaded when the tail
// is created, none is loaded during a decode step or on a device the runtime has filled since.
inline cudaError_t LoadKernel(const void* kernel, size_t smem_bytes) {
  cudaFuncAttributes attributes;
  const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
  if (e != cudaSuccess || smem_bytes <= 48 * 1024) return e;
  return SetMaxDynamicSharedMemory(kernel, static_cast<int>(smem_bytes));
}

template <typename Params>
cudaError_t LoadKernel(void (*kernel)(Params), size_t smem_bytes) {
  return LoadKernel(reinterpret_cast<const void*>(kernel), smem_bytes);
}

// The multiprocessors of `device`, asked of CUDA once per device.
cudaError_t MultiprocessorCount(int device, int* count);

// The kernel that `kernel` runs for a shape on a GPU of `multiprocessors` SMs: `kernel` itself,
// or for kAuto the rule's choice (mla/dispatch.h).
FusedKernel ResolveFusedKernel(FusedKernel kernel, int heads, int rows, int multiprocessors);

// Rows of latent per ColumnSplit block: 8 (loaded into registers), 16 or 32 (staged in shared
// memory). Each block keeps its 32 W_UV columns in registers across its rows, so larger blocks
// re-read W_UV less often.
int ColumnSplitBlockRows(int heads, int rows, int multiprocessors);

// The fused kernel's launch for `params` on a GPU of `multiprocessors` SMs: the one mapping from
// (FusedKernel, shape) to a kernel, used by the eager launch and by every graph node.
cudaError_t PlanFusedKernel(const FusedTailParams& params, FusedKernel kernel, int multiprocessors,
                            KernelLaunch* launch);

// Loads every kernel of the tail on the current device (LoadKernel), the fused kernels with
// their shared memory. Once per device before their first launch, outside any stream capture.
cudaError_t LoadTailKernels();

// The BMM path's kernels, before and after the cuBLASLt GEMM.
cudaError_t LaunchBmmPointers(const BmmPointerParams& params, cudaStream_t stream, bool pdl);
cudaError_t LaunchBmmGate(const BmmGateParams& params, cudaStream_t stream, bool pdl);
cudaError_t LoadBmmPointers();
cudaError_t LoadBmmGate();

// BmmPointersKernel, for callers that edit a captured BMM-path graph: its node takes a
// BmmPointerParams as its only argument.
const void* BmmPointersKernelAddress();

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_KERNELS_LAUNCH_H_

#ifndef MLA_TAIL_MLA_KERNELS_PARAMS_H_
#define MLA_TAIL_MLA_KERNELS_PARAMS_H_

// Kernel parameter blocks and their host launchers. Launchers validate nothing: callers
// (mla/tail.h) have checked every shape, stride and pointer. Each launch carries the
// programmatic-stream-serialization attribute when `pdl` is set, so that an upstream kernel's
// launch_dependents lets it start early (and, captured in a graph, the edge is programmatic).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {

// Fused W_UV projection and gate.
struct FusedTailParams {
  const bf16* latent;         // [B, H, 512]
  int64_t latent_row_stride;  // elements
  const bf16* w_uv;           // per head [128, 512], latent axis contiguous
  int64_t w_head_stride;
  int64_t w_row_stride;
  const bf16* gate;  // [B, H * 128]; null: no gate (kernels without one are launched)
  int64_t gate_row_stride;
  const int32_t* lengths;  // [B / q]
  bf16* output;            // [B, H * 128]
  int64_t output_row_stride;
  int heads;  // H
  int rows;   // B
  int q;
  const int32_t* row_count;  // null, or the live rows [0, B) on the device (read after the wait)
};

// The caller's buffers the gate reads and writes on the BMM path. BmmPointersKernel writes them
// to device memory and BmmGateKernel reads them from there, so that a pointer update on that path
// rewrites one kernel node (BmmPointersKernel's), as on the fused path.
struct GateOperands {
  const bf16* gate;  // [B, H * 128]; null: out = bf16(values)
  int64_t gate_row_stride;
  const int32_t* lengths;  // [B / q]
  bf16* output;            // [B, H * 128]
  int64_t output_row_stride;
  const int32_t* row_count;  // null, or the live rows on the device
};

// The gate applied to the batched GEMM's values.
struct BmmGateParams {
  const bf16* values;                 // [H, B, 128]: head h, row t at values + (h * B + t) * 128
  GateOperands operands;              // used when operand_table is null
  const GateOperands* operand_table;  // else the operands, written by an earlier kernel
  int heads;
  int rows;
  int q;
};

// The per-head operand addresses of the pointer-array batched GEMM, and the gate's operands.
struct BmmPointerParams {
  const bf16* latent;  // [B, H, 512]
  const bf16* w_uv;
  int64_t w_head_stride;
  bf16* values;  // [H, B, 128]
  int heads;
  int rows;
  GateOperands gate;
  const void** a_table;      // [H]: W_UV of head h
  const void** b_table;      // [H]: latent of head h, row 0
  void** d_table;            // [H]: values of head h
  GateOperands* gate_table;  // where `gate` is written for BmmGateKernel
};

// The BMM path's device scratch for BmmPointersKernel's output: three tables of kMaxHeads
// addresses, then the gate's operands.
inline constexpr size_t kOperandTableBytes =
    3 * size_t{kMaxHeads} * sizeof(void*) + sizeof(GateOperands);

// Kernel parameters for `shape` and the caller's `buffers` (with the BMM path's scratch):
// one mapping, used by the eager launches and by graph/ when it rewrites captured nodes.
inline FusedTailParams MakeFusedTailParams(const TailShape& shape, const TailBuffers& b) {
  return {b.latent,    b.latent_row_stride, b.w_uv,    b.w_head_stride, b.w_row_stride,
          b.gate,      b.gate_row_stride,   b.lengths, b.output,        b.output_row_stride,
          shape.heads, shape.rows,          shape.q,   b.row_count};
}

// `tables` is kOperandTableBytes of device memory (8-byte aligned).
inline BmmPointerParams MakeBmmPointerParams(const TailShape& shape, const TailBuffers& b,
                                             bf16* values, void* tables) {
  void** addresses = static_cast<void**>(tables);
  return {b.latent,
          b.w_uv,
          b.w_head_stride,
          values,
          shape.heads,
          shape.rows,
          {b.gate, b.gate_row_stride, b.lengths, b.output, b.output_row_stride, b.row_count},
          const_cast<const void**>(addresses),
          const_cast<const void**>(addresses + kMaxHeads),
          addresses + 2 * kMaxHeads,
          reinterpret_cast<GateOperands*>(addresses + 3 * kMaxHeads)};
}

inline BmmGateParams MakeBmmGateParams(const TailShape& shape, const BmmPointerParams& tables) {
  return {tables.values, {}, tables.gate_table, shape.heads, shape.rows, shape.q};
}

// The multiprocessors of `device`, asked of CUDA once per device.
cudaError_t MultiprocessorCount(int device, int* count);

// The kernel that `kernel` runs for a shape on a GPU of `multiprocessors` SMs: kColumnSplit or
// a kTile* / kPersistent* kernel (kAuto: the rule, mla/dispatch.h).
FusedKernel ResolveFusedKernel(FusedKernel kernel, int heads, int rows, int multiprocessors);

// Rows of latent per ColumnSplit block: 8 (loaded into registers), 16 or 32 (staged in shared
// memory). Each block keeps its 32 W_UV columns in registers across its rows, so larger blocks
// re-read W_UV less often.
int ColumnSplitBlockRows(int heads, int rows, int multiprocessors);

// One kernel launch: what cudaLaunchKernelEx takes, and what a graph's kernel node holds. The
// kernel's only argument is its params struct.
struct KernelLaunch {
  const void* function = nullptr;
  dim3 grid;
  dim3 block;
  unsigned int smem_bytes = 0;
};

// The fused kernel's launch for `params` on a GPU of `multiprocessors` SMs: the one mapping from
// (FusedKernel, shape, gate or none) to a kernel, used by the eager launch and by every graph
// node. With and without a gate the launch differs only in its function.
cudaError_t PlanFusedKernel(const FusedTailParams& params, FusedKernel kernel, int multiprocessors,
                            KernelLaunch* launch);

// Enqueues `launch` with `params` as its argument (cudaLaunchKernelEx), with the
// programmatic-stream-serialization attribute when `pdl` is set.
cudaError_t LaunchFusedKernel(const KernelLaunch& launch, const FusedTailParams& params,
                              cudaStream_t stream, bool pdl);

// Loads every kernel of the tail on the current device (CUDA would load each at its first launch
// or graph instantiation) and lets the fused kernels use their shared memory (above the 48 KB
// default). Once per device before their first launch, outside any stream capture.
cudaError_t LoadTailKernels();

// The gate kernel with the gate (`gated`, the operands' gate non-null) or without.
cudaError_t LaunchBmmGate(const BmmGateParams& params, bool gated, cudaStream_t stream, bool pdl);
cudaError_t LaunchBmmPointers(const BmmPointerParams& params, cudaStream_t stream, bool pdl);
cudaError_t LoadBmmGate();
cudaError_t LoadBmmPointers();

// BmmPointersKernel, for callers that edit a captured BMM-path graph: its node takes a
// BmmPointerParams as its only argument.
const void* BmmPointersKernelAddress();

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_KERNELS_PARAMS_H_

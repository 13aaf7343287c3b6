#ifndef MLA_KERNELS_PARAMS_H_
#define MLA_KERNELS_PARAMS_H_

// Kernel parameter blocks and their host launchers. Launchers validate nothing: callers
// (mla/tail.h) have checked every shape, stride and pointer. Each launch carries the
// programmatic-stream-serialization attribute when `pdl` is set, so that an upstream kernel's
// launch_dependents lets it start early (and, captured in a graph, the edge is programmatic).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "mla/tail_args.h"

namespace mla {

// Fused W_UV projection and gate.
struct MlaValueParams {
  const bf16* latent;         // [B, H, 512]
  int64_t latent_row_stride;  // elements
  const bf16* w_uv;           // per head [128, 512], latent axis contiguous
  int64_t w_head_stride;
  int64_t w_row_stride;
  const bf16* gate;           // [B, H * 128]
  int64_t gate_row_stride;
  const int32_t* lengths;     // [B / q]
  bf16* output;               // [B, H * 128]
  int64_t output_row_stride;
  int heads;                  // H
  int rows;                   // B
  int q;
};

// The caller's buffers the gate reads and writes on the BMM path. BmmPointersKernel writes them
// to device memory and MlaGate reads them from there, so that a pointer update on that path
// rewrites one kernel node (BmmPointersKernel's), as on the fused path.
struct GateOperands {
  const bf16* gate;           // [B, H * 128]
  int64_t gate_row_stride;
  const int32_t* lengths;     // [B / q]
  bf16* output;               // [B, H * 128]
  int64_t output_row_stride;
};

// The gate applied to the batched GEMM's values.
struct MlaGateParams {
  const bf16* values;                 // [H, B, 128]: head h, row t at values + (h * B + t) * 128
  GateOperands operands;              // used when operand_table is null
  const GateOperands* operand_table;  // else the operands, written by an earlier kernel
  int heads;
  int rows;
  int q;
};

// The per-head operand addresses of the pointer-array batched GEMM, and the gate's operands.
struct BmmPointerParams {
  const bf16* latent;         // [B, H, 512]
  const bf16* w_uv;
  int64_t w_head_stride;
  bf16* values;               // [H, B, 128]
  int heads;
  int rows;
  GateOperands gate;
  const void** a_table;       // [H]: W_UV of head h
  const void** b_table;       // [H]: latent of head h, row 0
  void** d_table;             // [H]: values of head h
  GateOperands* gate_table;   // where `gate` is written for MlaGate
};

// The BMM path's device scratch for BmmPointersKernel's output: three tables of kMaxHeads
// addresses, then the gate's operands.
inline constexpr size_t kOperandTableBytes =
    3 * size_t{kMaxHeads} * sizeof(void*) + sizeof(GateOperands);

// Kernel parameters for `shape` and the caller's `buffers` (with the BMM path's scratch):
// one mapping, used by the eager launches and by graph/ when it rewrites captured nodes.
inline MlaValueParams MakeMlaValueParams(const TailShape& shape, const TailBuffers& b) {
  return {b.latent, b.latent_row_stride, b.w_uv, b.w_head_stride, b.w_row_stride, b.gate,
          b.gate_row_stride, b.lengths, b.output, b.output_row_stride, shape.heads, shape.rows,
          shape.q};
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
          {b.gate, b.gate_row_stride, b.lengths, b.output, b.output_row_stride},
          const_cast<const void**>(addresses),
          const_cast<const void**>(addresses + kMaxHeads),
          addresses + 2 * kMaxHeads,
          reinterpret_cast<GateOperands*>(addresses + 3 * kMaxHeads)};
}

inline MlaGateParams MakeMlaGateParams(const TailShape& shape, const BmmPointerParams& tables) {
  return {tables.values, {}, tables.gate_table, shape.heads, shape.rows, shape.q};
}

// The kernel of the fused path. All follow SPEC.md; they add the products in different orders,
// so v may differ by 1 bf16 ulp where the FP32 sum is not exact.
enum class MlaValueVariant {
  kAuto,         // the measured rule (mla/dispatch.h) decides by shape
  kColumnSplit,  // MlaValue: 128 threads per (32 columns, head, 16 or 32 rows), W_UV in registers
  // MlaValueWgmma: wgmma from shared memory, 8 steps of 64 latent values; the variants differ
  // in the tile and in how the steps are brought in.
  kWgmmaP4,      // 64 rows x 64 columns a block (one warpgroup), a 4-stage pipeline
  kWgmmaA8,      // 64 x 64, all 8 steps in flight at once (one memory round trip; 140 KB of
                 // shared memory, one block a multiprocessor), each step's MMAs running on while
                 // the next step's copies land: for grids smaller than the GPU
  kWgmmaN128,    // 64 x 128 (all of a head's columns: each latent row read once), 3 stages,
                 // two warpgroups of 64 columns
  kWgmmaA8N32,   // 64 x 32, all 8 steps in flight (101 KB: two blocks a multiprocessor)
  kWgmmaP6,      // 64 x 64, a 6-stage pipeline (105 KB: two blocks a multiprocessor)
  // MlaValueWgmma-ws (mla_value_ws.cu): 128 x 128 tiles, one block a multiprocessor looping over
  // them; a producer warpgroup's copies and two consumer warpgroups' MMAs (sharing each W_UV
  // slice) hand a ring of 6 buffers over mbarriers, so the copies run on through every epilogue
  kWgmmaWs,
};

// Every kernel of the fused path, for callers that force each in turn (tests, benchmarks).
inline constexpr MlaValueVariant kMlaValueKernels[] = {
    MlaValueVariant::kColumnSplit, MlaValueVariant::kWgmmaP4, MlaValueVariant::kWgmmaA8,
    MlaValueVariant::kWgmmaN128, MlaValueVariant::kWgmmaA8N32, MlaValueVariant::kWgmmaP6,
    MlaValueVariant::kWgmmaWs};

const char* MlaValueVariantName(MlaValueVariant variant);

// The kernel that `variant` runs for a shape: kColumnSplit or a kWgmma*.
MlaValueVariant ResolveMlaValueVariant(MlaValueVariant variant, int heads, int rows);

// Rows of latent per MlaValue block: 8 (loaded into registers), 16 or 32 (staged in shared
// memory). Each block keeps its 32 W_UV columns in registers across its rows, so larger blocks
// re-read W_UV less often.
int MlaValueBlockRows(int heads, int rows);

// Loads every kernel of the tail on the current device (CUDA would load each at its first launch
// or graph instantiation) and lets the fused kernels use their shared memory (above the 48 KB
// default). Once per device before their first launch, outside any stream capture:
// MlaTail::Create calls it. cuBLASLt's own kernels, on the BMM path, still load at their first
// launch.
cudaError_t PrepareTailKernels();

cudaError_t LaunchMlaValue(const MlaValueParams& params, cudaStream_t stream, bool pdl,
                           MlaValueVariant variant = MlaValueVariant::kAuto);
cudaError_t LaunchMlaGate(const MlaGateParams& params, cudaStream_t stream, bool pdl);
cudaError_t LaunchBmmPointers(const BmmPointerParams& params, cudaStream_t stream, bool pdl);
cudaError_t PrepareMlaGate();
cudaError_t PrepareBmmPointers();

// The kernels, for callers that edit kernel nodes of a captured graph in place: a node whose
// function is one of these takes the matching params struct as its only argument.
// MlaValueKernelAddress is the kernel LaunchMlaValue launches for the same arguments.
const void* MlaValueKernelAddress(int heads, int rows,
                                  MlaValueVariant variant = MlaValueVariant::kAuto);
const void* MlaGateKernelAddress();
const void* BmmPointersKernelAddress();

}  // namespace mla

#endif  // MLA_KERNELS_PARAMS_H_

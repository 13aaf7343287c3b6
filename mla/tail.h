#ifndef MLA_TAIL_MLA_TAIL_H_
#define MLA_TAIL_MLA_TAIL_H_

// MlaTail: the MLA attention tail of one layer on one device, launched eagerly.
//
//   auto tail = mla_tail::MlaTail::Create(/*device=*/0, {});
//   MLA_TAIL_RETURN_IF_ERROR((*tail)->Run({heads, rows, q}, buffers, stream));
//
// Run() validates every argument, then launches a fused kernel (chosen by the measured rule,
// mla/dispatch.h, or by the caller) or, on TailPath::kBmm, the cuBLASLt batched GEMM and a gate
// kernel, each launch carrying
// the programmatic-dependent-launch attribute: after a kernel that triggers its dependents, the
// fused kernels fetch W_UV before they wait for it.
//
// Capture: Run() may be called while `stream` is being captured (the caller's own decode-step
// graph): its launches are recorded there, PDL edge included. No call of this class
// synchronises the device or uses the legacy stream on its own; Create and the destructor are
// safe while other threads capture on the same device.
//
// Threads: an instance may be used by one thread at a time. Its fused path holds no device
// memory, so any number of fused Run() calls may overlap on the GPU. The BMM path's scratch is
// the instance's own: BMM runs of one instance must be ordered on the GPU.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/dispatch.h"
#include "mla_tail/mla/tail_args.h"

namespace mla_tail {

namespace internal {
class TailAccess;
}  // namespace internal

enum class TailPath {
  kAuto,   // the library's choice: the fused path, faster than the BMM path at every measured
           // shape (docs/design.md)
  kFused,  // a fused kernel (TailOptions::fused_kernel, or the rule of mla/dispatch.h)
  kBmm,    // cuBLASLt batched GEMM + gate kernel
};

const char* TailPathName(TailPath path);

struct TailOptions {
  // Whether the BMM path may run. Its scratch (values [max_heads, max_rows, 128] and a
  // cuBLASLt workspace) is allocated on the first PrepareBmm(), or the first BMM Run() outside a
  // capture, that cuBLASLt plans: never by Create, never for the fused path.
  bool bmm = true;
  int max_heads = kMaxHeads;  // capacity of the BMM path's scratch
  int max_rows = 1024;
  size_t workspace_bytes = size_t{32} << 20;      // cuBLASLt workspace (32 MiB suits Hopper)
  bool pdl = true;                                // launch with programmatic stream serialization
  FusedKernel fused_kernel = FusedKernel::kAuto;  // the fused path's kernel
  // Every call asks CUDA what each buffer points at (docs/spec.md, "Pointers"). Otherwise an
  // allocation found reachable is remembered for the process, by its address range, and not
  // asked about again: a buffer freed and reallocated at the same address passes unseen.
  bool full_pointer_checks = false;
};

class MlaTail {
 public:
  // Checks the device (sm_90) and loads the tail's kernels there, outside any capture, so that
  // Run() may be captured: into the context of `device` current on the calling thread, else the
  // device's primary context (docs/spec.md, "Contexts"); use the instance from that context.
  // FailedPrecondition without a usable sm_90 device; InvalidArgument for options out of range.
  static absl::StatusOr<std::unique_ptr<MlaTail>> Create(int device, const TailOptions& options);

  // Never blocks: the BMM scratch goes back to CUDA in stream order, after the instance's last
  // eager BMM run. Graphs captured from this instance's BMM path must not be launched after it
  // is destroyed, and their launches must have completed before (the release is not ordered
  // after them); fused-path graphs hold nothing of it.
  ~MlaTail();
  MlaTail(const MlaTail&) = delete;
  MlaTail& operator=(const MlaTail&) = delete;

  // Validates, then enqueues the tail on `stream` (a stream of this instance's device, or 0 for
  // the legacy default stream), or records it when `stream` is capturing. Validation includes
  // what each buffer points at: InvalidArgument, naming it, for host memory the device cannot
  // reach, memory of another device, or an allocation shorter than rows x stride. When
  // validation fails nothing is launched and nothing written; a capture of the caller's that is
  // invalid is FailedPrecondition. The BMM path needs TailOptions::bmm
  // (FailedPrecondition otherwise), rows <= max_rows and heads <= max_heads (OutOfRange), under
  // capture a plan made beforehand, by PrepareBmm() or a BMM Run() outside a capture, for the
  // shape's heads and rows and the buffers' latent and W_UV row strides (FailedPrecondition
  // otherwise), and cuBLASLt, which
  // its first use outside a capture loads (FailedPrecondition when it cannot be loaded).
  absl::Status Run(const TailShape& shape, const TailBuffers& buffers, cudaStream_t stream,
                   TailPath path = TailPath::kAuto);

  // Run()'s checks of `shape` and `buffers` for `path` (validation, the path's types, and what
  // each buffer points at, feeding the same cache), with the same statuses; launches nothing,
  // writes nothing and takes no stream. Whether the instance has the BMM path, its capacity and
  // plan are not checked. A runtime that updates many nodes checks every layer's buffers first,
  // so that a bad one leaves no node changed; TailNode::Update also refuses buffers of another
  // weight or output type than its node's, and an exec of another graph.
  absl::Status CheckBuffers(const TailShape& shape, const TailBuffers& buffers,
                            TailPath path = TailPath::kAuto) const;

  // Allocates the BMM scratch if need be and plans the GEMM for this shape and these strides,
  // outside any capture (Run() does so on first use when not capturing).
  absl::Status PrepareBmm(const TailShape& shape, const TailBuffers& buffers);

  // InvalidArgument when `path` is not a TailPath; Unimplemented when it is the BMM path and
  // `buffers` hold e4m3 W_UV or an e4m3 output: the fused path alone takes them. OK otherwise
  // (nothing else is checked).
  static absl::Status CheckPathTakes(TailPath path, const TailBuffers& buffers);

  // The fused kernel Run() launches for `shape`, W_UV of `weight` and an output of `output` on
  // this instance's device.
  FusedKernel FusedKernelFor(const TailShape& shape, WeightType weight = WeightType::kBf16,
                             OutputType output = OutputType::kBf16) const;

  // OK when `stream` may carry this instance's work: the legacy or per-thread default stream,
  // or a stream of this instance's device (not checked while the stream is capturing, where CUDA
  // refuses the query; a stream of another device then fails at the launch).
  absl::Status CheckStream(cudaStream_t stream) const;

  int device() const;
  const TailOptions& options() const;
  // Bytes of device memory this instance allocated: the BMM path's scratch once allocated, else
  // 0. Its memory pool maps them in its own granularity, so the device memory held can be more.
  size_t scratch_bytes() const;

 private:
  friend class internal::TailAccess;
  struct Impl;
  explicit MlaTail(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mla_tail

#endif  // MLA_TAIL_MLA_TAIL_H_

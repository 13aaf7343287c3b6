#ifndef MLA_TAIL_GRAPH_TAIL_GRAPH_SET_H_
#define MLA_TAIL_GRAPH_TAIL_GRAPH_SET_H_

// TailGraphSet: a model's MLA attention tails captured into CUDA graphs, one per (layer, batch
// bucket), replayed with pointers updated in place.
//
//   GraphSetOptions options;                // heads, q, layers, buckets, path, ...
//   options.heads = 12;
//   options.layers = 61;
//   absl::StatusOr<std::unique_ptr<TailGraphSet>> made = TailGraphSet::Create(device, options);
//   TailGraphSet& set = **made;            // after checking made.ok()
//   set.SetLayer(l, buffers);              // each layer's pointers and strides (any time)
//   set.CaptureAll();                      // ahead of time, or let Replay capture lazily
//   ZeroPaddingLengths(lengths, rows, *set.BucketRows(rows), q, stream);
//   set.Replay(l, rows, stream);           // the smallest bucket >= rows
//
// Updates: SetLayer may change any pointer between replays. The next Replay of a (layer,
// bucket) graph that still holds other pointers rewrites one kernel node's parameters
// (cudaGraphExecKernelNodeSetParams: the fused kernel's node; on the BMM path the operand-table
// node, whose output the cuBLASLt GEMM and the gate kernel read, so those nodes never change)
// before launching it: no capture, no instantiation, and launches already enqueued keep the
// parameters they had. A change of the latent or W_UV row stride on the BMM path, which the
// GEMM's descriptors hold, re-captures that graph (counted in stats()). Replaying unchanged
// pointers costs one comparison of the buffers and one query of the stream's ID (which stream,
// so that its device is asked once). docs/benchmarks.md has the measured costs.
//
// Padding: rows between `rows` and the bucket are skipped, neither read nor written, when the
// buffers carry a live row count (TailBuffers::row_count) that holds `rows`. Without one they
// belong to requests that must have length 0 (the kernels write their output rows as +0.0
// whatever their inputs hold); ZeroPaddingLengths writes those zeros in stream order.
//
// Inside the caller's capture: Replay on a stream that is being captured (a runtime capturing
// its whole decode step) records the bucket's tail into that capture, as MlaTail::Run would,
// programmatic edge included; it launches no graph of its own, which CUDA would refuse. The
// recorded nodes hold the pointers set at that time; to update them in place, build the step
// with mla_tail::AddTailNode (graph/tail_node.h) instead.
//
// Embedding as a child graph: ExportGraph returns a clone of a (layer, bucket) graph, owned by
// the caller. A child-graph node has no programmatic edge, so the tail then starts only after
// the kernel before it has completed; AddTailNode keeps that overlap.
//
// Threads and streams: a set is used by one thread at a time. On the fused path, replays of
// different (layer, bucket) graphs may run at once on different streams (each graph holds only
// the caller's pointers); replays of one graph never do, whatever the streams, since CUDA runs
// one launch of an executable graph at a time, each after the one before (two micro-batches
// that overlap take a set each). On the BMM path all
// graphs of a set share its scratch, so their replays must be ordered on the GPU (one stream,
// or streams joined by events). A set works on
// its own device whatever device the calling thread has current, and none of its calls
// synchronises the device or breaks another thread's capture. Failures (a capture invalidated,
// memory exhausted, cuBLASLt without an algorithm) return a status and publish nothing: no
// half-built graph is ever replayed, and a later call retries.
//
// Lifetime: destroying a set never blocks; graphs still running finish. Graphs exported from a
// set that takes the BMM path (and its tails recorded into the caller's captures) use its
// scratch: they must not be launched after the set is gone, and the caller's launches of them
// must have completed before it goes.

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/mla/padding.h"  // ZeroPaddingLengths, for the padding of a bucket
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

struct CUctx_st;  // the driver API's context (CUcontext is a pointer to it)

namespace mla_tail {

// A set's limits: the host state of every (layer, bucket) graph is held for the set's lifetime.
inline constexpr int kMaxGraphSetLayers = 1024;
inline constexpr int64_t kMaxGraphSetGraphs = int64_t{1} << 18;  // layers x buckets

struct GraphSetOptions {
  int heads = 0;             // H, 1..128
  int q = 1;                 // tokens per request
  int layers = 0;            // layers of the model, 1..kMaxGraphSetLayers
  std::vector<int> buckets;  // rows per bucket, sorted; empty: DefaultBuckets(q)
  int max_eager_rows = 0;    // Replay of more rows than the largest bucket runs the eager tail
                             // up to this many rows (0: OutOfRange instead)
  TailPath path = TailPath::kAuto;                // the path of every graph (kAuto: fused)
  FusedKernel fused_kernel = FusedKernel::kAuto;  // the fused path's kernel
  bool pdl = true;
  size_t workspace_bytes = size_t{32} << 20;  // cuBLASLt workspace, shared by all graphs
                                              // (path kBmm)
  bool full_pointer_checks = false;           // TailOptions::full_pointer_checks, for SetLayer, the
                                              // eager fallback and each (re)capture
};

struct GraphSetStats {
  int64_t graphs_captured = 0;  // captures that became executable graphs (re-captures too)
  int64_t instantiations = 0;   // successful cudaGraphInstantiate calls
  int64_t node_updates = 0;     // kernel nodes rewritten in executable graphs
  int64_t replays = 0;          // graph launches
  int64_t eager_runs = 0;       // Replay calls the eager tail served (ran or recorded)
  double capture_seconds = 0;   // host time spent capturing and instantiating
  // Device memory taken by captures and instantiations; a BMM-path set's first capture counts
  // the scratch it allocates as well.
  int64_t graph_memory_bytes = 0;
  // Device memory the set holds besides its graphs: the BMM path's scratch, allocated at the
  // first capture or eager run of a set whose path is kBmm.
  int64_t scratch_bytes = 0;
};

class TailGraphSet {
 public:
  // Validates the options, makes the set's capture stream and loads the kernels; captures
  // nothing yet and allocates no device memory of its own (a BMM-path set's scratch comes with
  // its first capture or eager run).
  static absl::StatusOr<std::unique_ptr<TailGraphSet>> Create(int device,
                                                              const GraphSetOptions& options);
  ~TailGraphSet();
  TailGraphSet(const TailGraphSet&) = delete;
  TailGraphSet& operator=(const TailGraphSet&) = delete;

  // Sets a layer's pointers and strides, checked for the most rows a Replay can run (the
  // largest bucket, or max_eager_rows when larger): latent, gate and output hold that many rows,
  // lengths that many requests, in memory this set's device can reach (MlaTail::Run's pointer
  // checks, made here and not at a graph's launch; not again for one of the layer's last two sets
  // that passed, but for full pointer checks; a capture or re-capture, in Replay, CaptureAll or
  // ExportGraph, runs the tail's checks again). Takes effect at the layer's next Replay; on error
  // the layer keeps what it had.
  absl::Status SetLayer(int layer, const TailBuffers& buffers);

  // Captures every (layer, bucket) graph not captured yet, and brings every captured one up to
  // its layer's present buffers (as a Replay would). Every layer must be set.
  absl::Status CaptureAll();

  // Runs layer `layer`'s tail for `rows` rows on `stream`: the smallest bucket >= rows,
  // captured first if it is not yet, or the eager tail for exactly `rows` up to max_eager_rows.
  // rows must be a positive multiple of q. On a capturing stream, records the tail into that
  // capture instead (above); a BMM-path bucket must have been captured (CaptureAll) first, with
  // the layer's present strides, and an eager fallback there needs an earlier run of those rows
  // outside any capture (the BMM path's plans, MlaTail::PrepareBmm).
  absl::Status Replay(int layer, int rows, cudaStream_t stream);

  // The rows a Replay of `rows` runs: the smallest bucket >= rows, or `rows` itself on the eager
  // fallback (up to max_eager_rows). InvalidArgument unless rows is a positive multiple of q;
  // OutOfRange where Replay would refuse.
  absl::StatusOr<int> BucketRows(int rows) const;

  // A clone of the layer's graph for `rows` (captured first if need be), owned by the caller.
  // InvalidArgument unless rows is a positive multiple of q; OutOfRange past the largest bucket
  // (the eager fallback has no graph).
  absl::StatusOr<cudaGraph_t> ExportGraph(int layer, int rows);

  const std::vector<int>& buckets() const { return options_.buckets; }
  const GraphSetOptions& options() const { return options_; }
  const GraphSetStats& stats() const { return stats_; }
  int device() const { return device_; }

 private:
  struct Entry;
  TailGraphSet(int device, GraphSetOptions options, std::unique_ptr<MlaTail> tail);
  Entry& EntryFor(int layer, int bucket_index);
  absl::Status CheckLayer(int layer) const;
  absl::Status Capture(int layer, int bucket_index);
  // Capture, counting the device memory it takes into stats() (captures one at a time).
  absl::Status CaptureMeasured(int layer, int bucket_index);
  absl::StatusOr<Entry> CaptureEntry(int layer, int bucket_index);
  // Brings the graph up to the layer's present buffers: a node update, or a re-capture (counted
  // into stats() when `measure`) where a GEMM stride, the gate's presence or a type changed.
  absl::Status Apply(int layer, int bucket_index, bool measure = true);
  absl::Status CheckRows(int rows) const;
  int max_rows() const;
  bool bmm() const { return options_.path == TailPath::kBmm; }

  int device_;
  GraphSetOptions options_;
  // The IDs (cudaStreamGetId) of the last streams MlaTail::CheckStream accepted, oldest
  // replaced first: IDs are never reused, where a destroyed stream's handle may come back as
  // another device's stream. The first `accepted_count_` entries are set.
  std::array<unsigned long long, 4> accepted_stream_ids_ = {};  // NOLINT(runtime/int)
  int accepted_count_ = 0;
  int next_accepted_ = 0;
  std::unique_ptr<MlaTail> tail_;  // the eager tail, whose launches are captured
  cudaStream_t capture_stream_ = nullptr;
  // The context current at Create (its handle and cuCtxGetId's ID): where the destructor
  // releases the graphs.
  CUctx_st* context_ = nullptr;  // a CUcontext, kept without including the driver API's header
  unsigned long long context_id_ = 0;  // NOLINT(runtime/int)
  struct LayerState {
    TailBuffers buffers;  // valid once `set`
    bool set = false;
    // The last buffer sets validated and checked, most recent first: SetLayer with one of them
    // again skips ValidateTail and the cached pointer checks while the cache has forgotten
    // nothing since.
    std::array<TailBuffers, 2> checked{};
    int checked_count = 0;
    uint64_t checked_stamp = 0;  // the pointer cache's when they were checked
  };
  std::vector<LayerState> layers_;
  std::vector<Entry> entries_;  // [layer][bucket]
  GraphSetStats stats_;
};

}  // namespace mla_tail

#endif  // MLA_TAIL_GRAPH_TAIL_GRAPH_SET_H_

// libtail_plugin.so: mla_tail behind a C interface (tail_plugin.h), as a runtime's plugin or
// extension module embeds it. Linked with mla_tail's public targets into a shared library; its
// only exported symbols are tail_plugin_* (tail_plugin.lds).
//
// The linking, the C interface and its error reporting are the pattern; the modes are test
// scaffolding for plugin_host, one layer checked per call, and not patterns to copy: the tail
// node mode builds and instantiates a graph every call, the graph-set mode makes a set per exact
// (heads, rows) with a single bucket and one layer, and nothing is guarded for concurrent calls.
// A runtime builds its graphs once (embedding_snippets.cc: MakeTailGraphSet with the model's
// layers and buckets, AddTailsToStepGraph) and only updates or replays them per step.

#include "plugin/tail_plugin.h"

#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "mla_tail/mla/tail_args.h"

// Used by one thread at a time (tail_plugin.h): `sets` is not guarded.
struct TailPlugin {
  int device = 0;
  std::unique_ptr<mla_tail::MlaTail> tail;
  std::map<std::pair<int, int>, std::unique_ptr<mla_tail::TailGraphSet>> sets;  // (heads, rows)
};

namespace {

int Report(const absl::Status& status, char* message, size_t size) {
  if (message != nullptr && size > 0) {
    std::snprintf(message, size, "%s", status.ToString().c_str());
  }
  return static_cast<int>(status.code());
}

// Runs an entry point's body. No exception may unwind through the C interface: with exceptions
// enabled, one escaping the body (std::bad_alloc from `new` or the map) becomes Internal, reported
// without allocating.
template <typename Body>
int Guarded(char* message, size_t size, Body body) {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  try {
    return body();
  } catch (const std::exception& e) {
    if (message != nullptr && size > 0) std::snprintf(message, size, "INTERNAL: %s", e.what());
  } catch (...) {
    if (message != nullptr && size > 0) std::snprintf(message, size, "INTERNAL: an exception");
  }
  return static_cast<int>(absl::StatusCode::kInternal);
#else
  return body();
#endif
}

absl::Status Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(what) + ": " + cudaGetErrorString(error));
}

// A graph of one tail node, instantiated on the tail's device (the node's kernel is no function
// of a device: the graph is instantiated for the thread's current one) and launched on a stream
// of it; the executable graph is freed once its launch completes (CUDA defers the destruction
// of a graph in flight). The thread's device is restored. Test scaffolding: a graph created and
// instantiated every call costs far more than the tail; a runtime instantiates once and moves
// pointers with TailNode::Update.
absl::Status RunAsNode(const mla_tail::MlaTail& tail, int device, const mla_tail::TailShape& shape,
                       const mla_tail::TailBuffers& buffers, cudaStream_t stream) {
  MLA_TAIL_RETURN_IF_ERROR(tail.CheckStream(stream));
  int caller_device = 0;
  MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaGetDevice(&caller_device), "cudaGetDevice"));
  if (caller_device != device) {
    MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaSetDevice(device), "cudaSetDevice"));
  }
  struct RestoreDevice {
    int caller, device;
    ~RestoreDevice() {
      if (caller != device) cudaSetDevice(caller);
    }
  } restore{caller_device, device};
  cudaGraph_t graph = nullptr;
  MLA_TAIL_RETURN_IF_ERROR(Cuda(cudaGraphCreate(&graph, 0), "cudaGraphCreate"));
  absl::StatusOr<mla_tail::TailNode> node = mla_tail::AddTailNode(tail, graph, {}, shape, buffers);
  cudaGraphExec_t exec = nullptr;
  absl::Status status = node.status();
  if (status.ok()) status = Cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  if (status.ok()) status = Cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return status;
}

absl::Status Run(TailPlugin& plugin, const TailPluginLayer& layer, int mode, cudaStream_t stream) {
  const mla_tail::TailShape shape{layer.heads, layer.rows, 1};
  const mla_tail::TailBuffers buffers =
      mla_tail::CompactBuffers(shape, static_cast<const mla_tail::bf16*>(layer.latent),
                               static_cast<const mla_tail::bf16*>(layer.w_uv),
                               static_cast<const mla_tail::bf16*>(layer.gate), layer.lengths,
                               static_cast<mla_tail::bf16*>(layer.output));
  switch (mode) {
    case kTailPluginEager:
      return plugin.tail->Run(shape, buffers, stream);
    case kTailPluginNode:
      return RunAsNode(*plugin.tail, plugin.device, shape, buffers, stream);
    case kTailPluginGraphSet: {
      // Test scaffolding: a set per exact (heads, rows), one layer, one bucket. A runtime makes
      // one set per model, with its layers and batch buckets, ahead of time.
      std::unique_ptr<mla_tail::TailGraphSet>& set = plugin.sets[{layer.heads, layer.rows}];
      if (set == nullptr) {
        mla_tail::GraphSetOptions options;
        options.heads = layer.heads;
        options.layers = 1;
        options.buckets = {layer.rows};
        absl::StatusOr<std::unique_ptr<mla_tail::TailGraphSet>> created =
            mla_tail::TailGraphSet::Create(plugin.device, options);
        if (!created.ok()) return created.status();
        set = *std::move(created);
      }
      MLA_TAIL_RETURN_IF_ERROR(set->SetLayer(0, buffers));
      return set->Replay(0, layer.rows, stream);
    }
  }
  return absl::InvalidArgumentError("unknown mode " + std::to_string(mode));
}

}  // namespace

extern "C" int tail_plugin_create(int device, TailPlugin** plugin, char* message, size_t size) {
  return Guarded(message, size, [&] {
    if (plugin == nullptr) return Report(absl::InvalidArgumentError("null plugin"), message, size);
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
        mla_tail::MlaTail::Create(device, mla_tail::TailOptions{});
    if (!tail.ok()) return Report(tail.status(), message, size);
    *plugin = new TailPlugin{device, *std::move(tail), {}};
    return Report(absl::OkStatus(), message, size);
  });
}

extern "C" int tail_plugin_run(TailPlugin* plugin, const TailPluginLayer* layer, int mode,
                               cudaStream_t stream, char* message, size_t size) {
  return Guarded(message, size, [&] {
    if (plugin == nullptr || layer == nullptr) {
      return Report(absl::InvalidArgumentError("null plugin or layer"), message, size);
    }
    return Report(Run(*plugin, *layer, mode, stream), message, size);
  });
}

extern "C" void tail_plugin_destroy(TailPlugin* plugin) { delete plugin; }

#ifndef MLA_TAIL_EXAMPLES_RUNTIME_PLUGIN_TAIL_PLUGIN_H_
#define MLA_TAIL_EXAMPLES_RUNTIME_PLUGIN_TAIL_PLUGIN_H_

/* The C interface of a runtime's tail plugin, libtail_plugin.so: what its host resolves with
   dlsym. The plugin is built on mla_tail's public targets; the host knows only this header, which
   is C (C11 or later, as CUDA's headers need) as well as C++. */

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One layer's tail in device memory, compact (mla_tail::CompactBuffers), q = 1: latent
   [rows, heads, 512], W_UV [heads, 128, 512], gate and output [rows, heads * 128] (bf16),
   lengths [rows] (0: an inactive request, whose output row becomes +0.0). */
typedef struct TailPluginLayer {
  int heads;
  int rows;
  const void* latent;
  const void* w_uv;
  const void* gate;
  const int32_t* lengths;
  void* output;
} TailPluginLayer;

/* How tail_plugin_run enqueues the tail. */
typedef enum TailPluginMode {
  kTailPluginEager = 0,    /* mla_tail::MlaTail::Run */
  kTailPluginNode = 1,     /* a graph of one node from mla_tail::AddTailNode, launched */
  kTailPluginGraphSet = 2, /* mla_tail::TailGraphSet::Replay (a set per heads and rows) */
} TailPluginMode;

typedef struct TailPlugin TailPlugin;

/* Each returns 0 (OK) or the absl::StatusCode of the library's status, whose message goes to
   `message` (`size` bytes, NUL-terminated). FailedPrecondition (9) from tail_plugin_create: no
   usable sm_90 GPU. Internal (13): an exception inside the plugin (none crosses this interface).
   Calls on one TailPlugin must not overlap: it is used by one thread at a time. */
int tail_plugin_create(int device, TailPlugin** plugin, char* message, size_t size);
int tail_plugin_run(TailPlugin* plugin, const TailPluginLayer* layer, int mode, cudaStream_t stream,
                    char* message, size_t size);
void tail_plugin_destroy(TailPlugin* plugin);

typedef int (*TailPluginCreateFn)(int, TailPlugin**, char*, size_t);
typedef int (*TailPluginRunFn)(TailPlugin*, const TailPluginLayer*, int, cudaStream_t, char*,
                               size_t);
typedef void (*TailPluginDestroyFn)(TailPlugin*);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MLA_TAIL_EXAMPLES_RUNTIME_PLUGIN_TAIL_PLUGIN_H_ */

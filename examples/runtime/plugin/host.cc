// A host that loads the tail plugin with dlopen, as a serving runtime loads its plugins: it
// knows only the plugin's C interface (tail_plugin.h), links neither mla_tail nor Abseil, and
// owns the device memory and the stream the plugin works on.
//
//   plugin_host PATH/libtail_plugin.so
//
// With a usable GPU: per heads count, one layer's tail through each of the plugin's modes
// (eager, a tail node in a graph, a graph set), each checked against the runtime's CPU reference
// (reference.h); then an invalid call (a null latent), which must fail with InvalidArgument and
// write nothing. Prints PASS or FAIL (exit status 0 or 1). Without one, tail_plugin_create's
// FailedPrecondition is printed and the host exits 0, unless MLA_TAIL_REQUIRE_GPU=1.

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "formulas.h"
#include "plugin/tail_plugin.h"
#include "reference.h"

namespace example {
namespace {

constexpr int kLatentDim = 512;
constexpr int kValueDim = 128;
constexpr int kRows = 16;
constexpr int kFailedPrecondition = 9;  // absl::StatusCode
constexpr int kInvalidArgument = 3;
constexpr uint16_t kPoison = 0xffff;  // NaN: an element nothing wrote

struct Plugin {
  TailPluginCreateFn create = nullptr;
  TailPluginRunFn run = nullptr;
  TailPluginDestroyFn destroy = nullptr;
};

bool Load(const char* path, Plugin* plugin) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::printf("FAIL: dlopen: %s\n", dlerror());
    return false;
  }
  plugin->create = reinterpret_cast<TailPluginCreateFn>(dlsym(library, "tail_plugin_create"));
  plugin->run = reinterpret_cast<TailPluginRunFn>(dlsym(library, "tail_plugin_run"));
  plugin->destroy = reinterpret_cast<TailPluginDestroyFn>(dlsym(library, "tail_plugin_destroy"));
  if (plugin->create == nullptr || plugin->run == nullptr || plugin->destroy == nullptr) {
    std::printf("FAIL: %s lacks the tail_plugin_* entry points\n", path);
    dlclose(library);
    return false;
  }
  // Once its code has run the library stays loaded for the process: it holds CUDA's static
  // runtime, whose registrations (kernels, exit handlers) must not outlive its code.
  return true;
}

bool Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

// One layer of the runtime's stand-in model (formulas.h: step 0, set 0, layer 0) in device
// memory, every third request inactive.
class Layer {
 public:
  explicit Layer(int heads) : heads_(heads) {}
  ~Layer() {
    for (void* p : {latent_, w_uv_, gate_, output_, lengths_}) cudaFree(p);
  }

  bool Upload() {
    const int columns = heads_ * kValueDim;
    std::vector<uint16_t> latent(size_t{kRows} * heads_ * kLatentDim);
    for (int t = 0; t < kRows; ++t) {
      for (int h = 0; h < heads_; ++h) {
        for (int k = 0; k < kLatentDim; ++k) {
          latent[(static_cast<size_t>(t) * heads_ + h) * kLatentDim + k] =
              FloatToBf16(LatentCode(0, 0, t, h, k) * kLatentScale);
        }
      }
    }
    std::vector<uint16_t> w_uv(static_cast<size_t>(heads_) * kValueDim * kLatentDim);
    for (int h = 0; h < heads_; ++h) {
      for (int d = 0; d < kValueDim; ++d) {
        for (int k = 0; k < kLatentDim; ++k) {
          w_uv[(static_cast<size_t>(h) * kValueDim + d) * kLatentDim + k] =
              FloatToBf16(WeightCode(0, 0, h, k, d) * kWeightScale);
        }
      }
    }
    std::vector<uint16_t> gate(size_t{kRows} * columns);
    for (int t = 0; t < kRows; ++t) {
      for (int c = 0; c < columns; ++c)
        gate[static_cast<size_t>(t) * columns + c] = FloatToBf16(GateValue(0, 0, t, c));
    }
    lengths_host_.resize(kRows);
    for (int t = 0; t < kRows; ++t) lengths_host_[t] = t % 3 == 2 ? 0 : 1 + t;
    return Put(&latent_, latent.data(), latent.size() * 2) &&
           Put(&w_uv_, w_uv.data(), w_uv.size() * 2) && Put(&gate_, gate.data(), gate.size() * 2) &&
           Put(&lengths_, lengths_host_.data(), kRows * 4) &&
           Cuda(cudaMalloc(&output_, output_bytes()), "cudaMalloc(output)");
  }

  TailPluginLayer View() const {
    return {heads_, kRows, latent_, w_uv_, gate_, static_cast<const int32_t*>(lengths_), output_};
  }

  bool Poison(cudaStream_t stream) {
    return Cuda(cudaMemsetAsync(output_, 0xff, output_bytes(), stream), "poison");
  }

  // The output against the reference; `untouched`: every element must still be the poison.
  bool Check(cudaStream_t stream, bool untouched, const char* what) {
    std::vector<uint16_t> got(output_bytes() / 2);
    if (!Cuda(cudaMemcpyAsync(got.data(), output_, output_bytes(), cudaMemcpyDeviceToHost, stream),
              "download") ||
        !Cuda(cudaStreamSynchronize(stream), "synchronize")) {
      return false;
    }
    int64_t wrong = 0;
    std::string first;
    if (untouched) {
      for (uint16_t bits : got) wrong += bits != kPoison;
      first = "elements written by a call that failed";
    } else {
      LayerCase c;
      c.heads = heads_;
      c.rows = kRows;
      c.lengths = lengths_host_.data();
      wrong = CheckLayer(c, got.data(), &first);
    }
    std::printf("%s heads %d rows %d %s%s%s\n", wrong == 0 ? "PASS" : "FAIL", heads_, kRows, what,
                wrong == 0 ? "" : ": ", wrong == 0 ? "" : first.c_str());
    return wrong == 0;
  }

 private:
  size_t output_bytes() const { return size_t{kRows} * heads_ * kValueDim * 2; }
  static bool Put(void** device, const void* host, size_t bytes) {
    // A copy from pageable memory may return before its data lands, and the legacy stream it
    // runs on is not ordered with the host's non-blocking stream: wait for it. (A loop that
    // copies from pinned memory, truly asynchronously, must also not rewrite the host buffer
    // until the copy has completed.)
    return Cuda(cudaMalloc(device, bytes), "cudaMalloc") &&
           Cuda(cudaMemcpy(*device, host, bytes, cudaMemcpyHostToDevice), "upload") &&
           Cuda(cudaDeviceSynchronize(), "upload");
  }

  int heads_;
  void* latent_ = nullptr;
  void* w_uv_ = nullptr;
  void* gate_ = nullptr;
  void* output_ = nullptr;
  void* lengths_ = nullptr;
  std::vector<int32_t> lengths_host_;
};

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::printf("usage: %s PATH/libtail_plugin.so\n", argv[0]);
    return 2;
  }
  Plugin plugin;
  if (!Load(argv[1], &plugin)) return 1;
  char message[512] = "";
  TailPlugin* tail = nullptr;
  const int created = plugin.create(/*device=*/0, &tail, message, sizeof(message));
  if (created != 0) {
    const char* require = std::getenv("MLA_TAIL_REQUIRE_GPU");
    const bool skip =
        created == kFailedPrecondition && (require == nullptr || std::strcmp(require, "1") != 0);
    std::printf("%s: tail_plugin_create: %s\n", skip ? "SKIP (no usable GPU)" : "FAIL", message);
    return skip ? 0 : 1;
  }
  cudaStream_t stream = nullptr;
  bool ok = Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const struct {
    int mode;
    const char* name;
  } modes[] = {{kTailPluginEager, "eager"},
               {kTailPluginNode, "tail node"},
               {kTailPluginGraphSet, "graph set"}};
  for (int heads : {12, 64}) {
    if (!ok) break;
    Layer layer(heads);
    ok = layer.Upload();
    for (const auto& m : modes) {
      if (!ok) break;
      const TailPluginLayer view = layer.View();
      ok = layer.Poison(stream);  // prints its own failure
      if (!ok) break;
      if (plugin.run(tail, &view, m.mode, stream, message, sizeof(message)) != 0) {
        std::printf("FAIL heads %d %s: tail_plugin_run: %s\n", heads, m.name, message);
        ok = false;
      }
      ok = ok && layer.Check(stream, /*untouched=*/false, m.name);
    }
    TailPluginLayer invalid = layer.View();
    invalid.latent = nullptr;
    ok = ok && layer.Poison(stream);
    const int code =
        ok ? plugin.run(tail, &invalid, kTailPluginEager, stream, message, sizeof(message)) : -1;
    if (ok && code != kInvalidArgument) {
      std::printf("FAIL heads %d: a null latent returned %d (%s), want InvalidArgument\n", heads,
                  code, message);
      ok = false;
    }
    ok = ok && layer.Check(stream, /*untouched=*/true, "null latent: InvalidArgument");
  }
  plugin.destroy(tail);
  if (stream != nullptr) cudaStreamDestroy(stream);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace example

int main(int argc, char** argv) { return example::Main(argc, argv); }

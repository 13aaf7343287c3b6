// What a runtime can get wrong and the library must refuse without harm: pointers the device
// cannot reach (pageable host memory, memory of another device, freed memory, allocations
// shorter than the call), each refused by every call that takes buffers, with nothing written
// and the CUDA context usable afterwards; and the errors a runtime acts on (its own invalidated
// capture, handles of another graph), the caller's current context kept, graph replays that may
// and may not run at once.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mla/internal/pointer_checks.h"
#include "mla_tail/graph/tail_graph_set.h"
#include "mla_tail/graph/tail_node.h"
#include "mla_tail/mla/errors.h"
#include "mla_tail/mla/tail.h"
#include "testing/support/capture_on_another_thread.h"
#include "testing/support/fp8.h"
#include "testing/support/gpu.h"
#include "testing/support/gpu_stream_test.h"
#include "testing/support/problem.h"
#include "testing/support/status_macros.h"

namespace mla_tail_testing {
namespace {

using ::mla_tail::AddTailNode;
using ::mla_tail::GraphSetOptions;
using ::mla_tail::RecordTailNode;
using ::mla_tail::TailBuffers;
using ::mla_tail::TailGraphSet;
using ::mla_tail::TailNode;
using ::mla_tail::TailPath;
using ::mla_tail_testing::CaptureOnAnotherThread;
using ::testing::HasSubstr;

// Pageable host memory, 256-byte aligned (as a runtime's host staging buffer would be).
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes) : bytes_(bytes), data_(std::aligned_alloc(256, Round(bytes))) {
    memset(data_, 0, Round(bytes));
  }
  ~HostBuffer() { std::free(data_); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  static size_t Round(size_t bytes) { return (bytes + 255) / 256 * 256; }
  size_t bytes_;
  void* data_;
};

bool AllNan(const std::vector<uint16_t>& bits) {
  for (uint16_t b : bits) {
    if ((b & 0x7fff) <= 0x7f80) return false;
  }
  return true;
}

// Each buffer of `b` replaced in turn by `bad`.
std::vector<std::pair<const char*, TailBuffers>> EachBufferReplaced(const TailBuffers& b,
                                                                    void* bad) {
  std::vector<std::pair<const char*, TailBuffers>> cases;
  TailBuffers x = b;
  x.latent = static_cast<const mla_tail::bf16*>(bad);
  cases.push_back({"latent", x});
  x = b;
  x.w_uv = static_cast<const mla_tail::bf16*>(bad);
  cases.push_back({"w_uv", x});
  x = b;
  x.gate = static_cast<const mla_tail::bf16*>(bad);
  cases.push_back({"gate", x});
  x = b;
  x.lengths = static_cast<const int32_t*>(bad);
  cases.push_back({"lengths", x});
  x = b;
  x.output = static_cast<mla_tail::bf16*>(bad);
  cases.push_back({"output", x});
  return cases;
}

class SafetyGpuTest : public GpuStreamTest<> {
 protected:
  void SetUp() override {
    GpuStreamTest::SetUp();
    if (!StreamReady()) return;
    // Each test starts with nothing cached, so that its first call asks CUDA.
    mla_tail::internal::ForgetCheckedPointers();
    tail_ = MakeTail(false);
    ASSERT_NE(tail_, nullptr);
    full_ = MakeTail(true);
    ASSERT_NE(full_, nullptr);
  }

  static std::unique_ptr<mla_tail::MlaTail> MakeTail(bool full_checks, int device = 0) {
    mla_tail::TailOptions options;
    options.max_rows = 256;
    options.full_pointer_checks = full_checks;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
        mla_tail::MlaTail::Create(device, options);
    EXPECT_TRUE(tail.ok()) << tail.status();
    return tail.ok() ? *std::move(tail) : nullptr;
  }

  std::unique_ptr<Problem> MakeProblem(int heads, int rows, uint64_t seed) {
    ProblemOptions options;
    options.shape = {heads, rows, 1};
    options.seed = seed;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, stream_);
    EXPECT_TRUE(problem.ok()) << problem.status();
    return problem.ok() ? *std::move(problem) : nullptr;
  }

  // The problem's output still holds only NaN (nothing was written), and the context is usable:
  // the same tail then runs and is checked.
  void ExpectUntouchedThenUsable(const Problem& problem) {
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    absl::StatusOr<std::vector<uint16_t>> bits =
        DownloadBits(problem.buffers().output, problem.output_elements());
    ASSERT_TRUE(bits.ok()) << bits.status();
    EXPECT_TRUE(AllNan(*bits)) << "a refused call wrote the output";
    ASSERT_OK(tail_->Run(problem.shape(), problem.buffers(), stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem.Check(problem.buffers().output, problem.SampleRows(), true));
    ASSERT_OK(problem.PoisonOutput(problem.buffers().output, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  }

  // The tail over `buffers` (the problem's, some moved elsewhere) on both paths, with cached and
  // with full pointer checks: each run computes the reference.
  void ExpectRunsOnBothPaths(const Problem& problem, const TailBuffers& buffers) {
    for (TailPath path : {TailPath::kFused, TailPath::kBmm}) {
      for (mla_tail::MlaTail* tail : {tail_.get(), full_.get()}) {
        SCOPED_TRACE(absl::StrCat(mla_tail::TailPathName(path), ", ",
                                  tail == full_.get() ? "full" : "cached", " pointer checks"));
        ASSERT_OK(problem.PoisonOutput(buffers.output, stream_));
        ASSERT_OK(tail->Run(problem.shape(), buffers, stream_, path));
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        ASSERT_OK(problem.Check(buffers.output, problem.SampleRows(), true));
      }
    }
  }

  static void ExpectRefused(const absl::Status& status, const std::string& name,
                            const std::string& why) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(name + " = ")) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(why)) << status;
  }

  // A graph set of one layer (bucket 16, 12 heads) and a node of `tail` in a graph of its own,
  // both set to `first` (the buffers of a 12 x 16 problem).
  struct NodeAndLayer {
    std::unique_ptr<TailGraphSet> set;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    TailNode node;
    ~NodeAndLayer() {
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
  };
  static void MakeNodeAndLayer(const mla_tail::MlaTail& tail, const Problem& problem,
                               const TailBuffers& first, NodeAndLayer* made) {
    GraphSetOptions options;
    options.heads = 12;
    options.layers = 1;
    options.buckets = {16};
    options.full_pointer_checks = tail.options().full_pointer_checks;
    absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
    ASSERT_TRUE(set.ok()) << set.status();
    made->set = *std::move(set);
    ASSERT_OK(made->set->SetLayer(0, first));
    ASSERT_EQ(cudaGraphCreate(&made->graph, 0), cudaSuccess);
    absl::StatusOr<TailNode> node = AddTailNode(tail, made->graph, {}, problem.shape(), first);
    ASSERT_TRUE(node.ok()) << node.status();
    made->node = *node;
    ASSERT_EQ(cudaGraphInstantiate(&made->exec, made->graph, 0), cudaSuccess);
  }

  // `x`, whose latent is refused for `why`, refused by the node (both updates) and the layer.
  static void ExpectLatentRefused(NodeAndLayer& n, const TailBuffers& x, const std::string& why) {
    const TailBuffers kept = n.node.buffers();
    ExpectRefused(n.node.Update(n.exec, x), "latent", why);
    ExpectRefused(n.node.UpdateGraph(x), "latent", why);
    ExpectRefused(n.set->SetLayer(0, x), "latent", why);
    EXPECT_EQ(n.node.buffers().latent, kept.latent);
  }

  // Nothing written by the refusals, the context usable, and the node and the layer still run
  // `problem`'s own buffers (what they kept).
  void ExpectKeptAndRunning(NodeAndLayer& n, const Problem& problem) {
    const TailBuffers& b = problem.buffers();
    ASSERT_OK(problem.PoisonOutput(b.output, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ExpectUntouchedThenUsable(problem);
    ASSERT_EQ(cudaGraphLaunch(n.exec, stream_), cudaSuccess);
    ASSERT_OK(n.set->Replay(0, 16, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem.Check(b.output, problem.SampleRows(), true));
  }

  std::unique_ptr<mla_tail::MlaTail> tail_;
  std::unique_ptr<mla_tail::MlaTail> full_;
};

// Pageable host memory in place of each buffer: every path refuses it by name before anything
// is launched, and the context stays usable (a launch would fault with an illegal address and
// end it).
TEST_F(SafetyGpuTest, PageableHostMemoryIsRefusedByEveryPath) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 1);
  ASSERT_NE(problem, nullptr);
  HostBuffer host(size_t{1} << 20);
  for (const auto& [name, b] : EachBufferReplaced(problem->buffers(), host.as<void>())) {
    SCOPED_TRACE(name);
    for (TailPath path : {TailPath::kAuto, TailPath::kFused, TailPath::kBmm}) {
      ExpectRefused(tail_->Run(problem->shape(), b, stream_, path), name, "not memory CUDA knows");
    }
    ExpectRefused(tail_->PrepareBmm(problem->shape(), b), name, "not memory CUDA knows");
    ExpectRefused(full_->Run(problem->shape(), b, stream_), name, "not memory CUDA knows");
    if (std::string(name) != "output") {
      ExpectUntouchedThenUsable(*problem);
    } else {
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    }
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// An allocation that ends before the last byte the call touches (rows x stride) is refused by
// name; sizes in whole 2 MiB pages, so that no rounding of an allocation's size can hide it.
TEST_F(SafetyGpuTest, AllocationsShorterThanTheCallAreRefused) {
  // 64 heads x 256 rows: the latent spans 16 MiB, the gate and output 4 MiB.
  std::unique_ptr<Problem> problem = MakeProblem(64, 256, 2);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> short_memory = DeviceMemory::Allocate(size_t{2} << 20);
  ASSERT_TRUE(short_memory.ok());
  for (const auto& [name, b] : EachBufferReplaced(problem->buffers(), short_memory->get())) {
    const std::string n = name;
    if (n == "lengths" || n == "w_uv") continue;  // 1 KiB of lengths; W_UV is 16 MiB: below
    SCOPED_TRACE(name);
    ExpectRefused(tail_->Run(problem->shape(), b, stream_), name, "bytes before");
    ExpectRefused(full_->Run(problem->shape(), b, stream_, TailPath::kBmm), name, "bytes before");
    if (n != "output") ExpectUntouchedThenUsable(*problem);
  }
  // W_UV one head short.
  TailBuffers b = problem->buffers();
  absl::StatusOr<DeviceMemory> w = DeviceMemory::Allocate(size_t{63} * 128 * 512 * 2);
  ASSERT_TRUE(w.ok());
  ASSERT_EQ(cudaMemsetAsync(w->get(), 0, w->bytes(), stream_), cudaSuccess);
  b.w_uv = w->as<mla_tail::bf16>();
  ExpectRefused(tail_->Run(problem->shape(), b, stream_), "w_uv", "bytes before");
  ExpectUntouchedThenUsable(*problem);
  // A call of 63 heads over the same memory fits.
  ASSERT_OK(tail_->Run({63, 16, 1}, b, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// The e4m3 buffers are checked like every other: pageable host memory in place of each of
// w_uv_fp8, w_uv_scale, output_fp8 and output_scale is refused by name, and so is each placed so
// that its last 16 bytes (output_scale's last 4) lie past the end of a 2 MiB allocation. Nothing
// is written, neither the e4m3 output nor the memory put in a buffer's place, and the context
// stays usable: the good buffers then compute the tail.
TEST_F(SafetyGpuTest, E4m3BuffersAreCheckedLikeEveryBuffer) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 4);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<std::unique_ptr<Fp8Weights>> weights = Fp8Weights::Create(12, {});
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<std::unique_ptr<Fp8Output>> out = Fp8Output::Create(problem->shape(), false);
  ASSERT_TRUE(out.ok()) << out.status();
  TailBuffers good = problem->buffers();
  (*weights)->Apply(&good);
  (*out)->Apply(&good);
  const int64_t heads = 12, rows = 16;
  // Each buffer's bytes (docs/spec.md), and how far past the end of the allocation it is placed.
  const int64_t w_bytes = (heads - 1) * good.w_head_stride + 127 * good.w_row_stride + 512;
  const int64_t w_scale_bytes = ((heads - 1) * good.w_uv_scale_head_stride + 4) * 4;
  const int64_t out_bytes = (rows - 1) * good.output_row_stride + heads * 128;
  const int64_t out_scale_bytes = ((rows - 1) * good.output_scale_row_stride +
                                   (heads - 1) * good.output_scale_head_stride + 1) *
                                  4;
  HostBuffer host(size_t{1} << 20);  // zeros
  absl::StatusOr<DeviceMemory> page = DeviceMemory::Allocate(size_t{2} << 20);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(cudaMemset(page->get(), 0xff, page->bytes()), cudaSuccess);
  char* const end = page->as<char>() + page->bytes();
  struct Case {
    const char* name;
    TailBuffers buffers;
    const char* why;
  };
  std::vector<Case> cases;
  for (bool on_host : {true, false}) {
    const char* why = on_host ? "not memory CUDA knows" : "bytes before";
    auto at = [&](int64_t bytes, int64_t past) {
      return on_host ? host.as<char>() : end - bytes + past;
    };
    TailBuffers b = good;
    b.w_uv_fp8 = reinterpret_cast<const mla_tail::fp8_e4m3*>(at(w_bytes, 16));
    cases.push_back({"w_uv_fp8", b, why});
    b = good;
    b.w_uv_scale = reinterpret_cast<const float*>(at(w_scale_bytes, 16));
    cases.push_back({"w_uv_scale", b, why});
    b = good;
    b.output_fp8 = reinterpret_cast<mla_tail::fp8_e4m3*>(at(out_bytes, 16));
    cases.push_back({"output_fp8", b, why});
    b = good;
    b.output_scale = reinterpret_cast<float*>(at(out_scale_bytes, 4));
    cases.push_back({"output_scale", b, why});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.name, ": ", c.why));
    ASSERT_OK((*out)->Poison(stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ExpectRefused(tail_->Run(problem->shape(), c.buffers, stream_), c.name, c.why);
    ExpectRefused(full_->Run(problem->shape(), c.buffers, stream_), c.name, c.why);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK((*out)->CheckUntouched());
    std::vector<unsigned char> bytes(page->bytes());
    ASSERT_EQ(cudaMemcpy(bytes.data(), page->get(), bytes.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0xff), static_cast<long>(bytes.size()))
        << "a refused call wrote the device allocation";
    const unsigned char* const host_bytes = host.as<unsigned char>();
    EXPECT_EQ(std::count(host_bytes, host_bytes + (size_t{1} << 20), 0), 1L << 20)
        << "a refused call wrote the host buffer";
  }
  // The context is usable: the bf16 output of the same e4m3 weights against the reference, then
  // the good buffers' e4m3 output against its quantization.
  ReferenceInputs in = problem->reference_inputs();
  (*weights)->Apply(&in);
  TailBuffers bf16_output = problem->buffers();
  (*weights)->Apply(&bf16_output);
  ASSERT_OK(problem->PoisonOutput(bf16_output.output, stream_));
  ASSERT_OK(tail_->Run(problem->shape(), bf16_output, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(bf16_output.output, problem->SampleRows(), true, in));
  absl::StatusOr<std::vector<uint16_t>> bf16 =
      DownloadBits(bf16_output.output, problem->output_elements());
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_OK((*out)->Poison(stream_));
  ASSERT_OK(tail_->Run(problem->shape(), good, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const int64_t stride = bf16_output.output_row_stride;
  EXPECT_OK((*out)->Check([&](int t, int column) { return (*bf16)[t * stride + column]; }));
}

// Freed memory: refused when never checked before, and refused after it was checked and cached
// when the tail asks CUDA on every call (TailOptions::full_pointer_checks).
TEST_F(SafetyGpuTest, FreedMemoryIsRefused) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 64, 3);
  ASSERT_NE(problem, nullptr);
  // Never checked: 64 MiB freed at once (its own mapping).
  void* freed = nullptr;
  ASSERT_EQ(cudaMalloc(&freed, size_t{64} << 20), cudaSuccess);
  ASSERT_EQ(cudaFree(freed), cudaSuccess);
  for (const auto& [name, b] : EachBufferReplaced(problem->buffers(), freed)) {
    SCOPED_TRACE(name);
    ExpectRefused(tail_->Run(problem->shape(), b, stream_), name, "not memory CUDA knows");
  }
  // Checked and cached, then freed: the full checks see it.
  void* latent = nullptr;
  const size_t latent_bytes = size_t{64} * 12 * 512 * 2;
  ASSERT_EQ(cudaMalloc(&latent, latent_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(latent, problem->buffers().latent, latent_bytes,
                            cudaMemcpyDeviceToDevice, stream_),
            cudaSuccess);
  TailBuffers b = problem->buffers();
  b.latent = static_cast<const mla_tail::bf16*>(latent);
  ASSERT_OK(full_->Run(problem->shape(), b, stream_));
  ASSERT_OK(tail_->Run(problem->shape(), b, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(b.output, problem->SampleRows(), true));
  ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  ASSERT_EQ(cudaFree(latent), cudaSuccess);
  ExpectRefused(full_->Run(problem->shape(), b, stream_), "latent", "not memory CUDA knows");
  ExpectUntouchedThenUsable(*problem);
}

// Mapped pinned host memory (registered or allocated) and managed memory are reachable: the
// tail runs over them on both paths and computes the reference.
TEST_F(SafetyGpuTest, MappedPinnedAndManagedMemoryRun) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 4);
  ASSERT_NE(problem, nullptr);
  const TailBuffers b = problem->buffers();
  const size_t gate_bytes = size_t{16} * b.gate_row_stride * 2;
  const size_t latent_bytes = size_t{16} * b.latent_row_stride * 2;
  const size_t lengths_bytes = size_t{16} * 4;
  const size_t output_bytes = problem->output_elements() * 2;

  HostBuffer registered_gate(gate_bytes);
  ASSERT_EQ(cudaHostRegister(registered_gate.as<void>(), (gate_bytes + 255) / 256 * 256,
                             cudaHostRegisterMapped),
            cudaSuccess);
  void* pinned_lengths = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned_lengths, lengths_bytes, cudaHostAllocMapped), cudaSuccess);
  void* managed_latent = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed_latent, latent_bytes), cudaSuccess);
  void* managed_output = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed_output, output_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(registered_gate.as<void>(), b.gate, gate_bytes, cudaMemcpyDefault),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(pinned_lengths, b.lengths, lengths_bytes, cudaMemcpyDefault), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(managed_latent, b.latent, latent_bytes, cudaMemcpyDefault), cudaSuccess);

  TailBuffers host_backed = b;
  host_backed.gate = registered_gate.as<mla_tail::bf16>();
  host_backed.lengths = static_cast<const int32_t*>(pinned_lengths);
  host_backed.latent = static_cast<const mla_tail::bf16*>(managed_latent);
  host_backed.output = static_cast<mla_tail::bf16*>(managed_output);
  ExpectRunsOnBothPaths(*problem, host_backed);
  EXPECT_EQ(cudaHostUnregister(registered_gate.as<void>()), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned_lengths), cudaSuccess);
  EXPECT_EQ(cudaFree(managed_latent), cudaSuccess);
  EXPECT_EQ(cudaFree(managed_output), cudaSuccess);
}

// Driver function `name` as of CUDA `version`, through the runtime's entry points (as the library
// resolves its own); left null where the driver lacks it.
template <typename Function>
void ResolveDriver(const char* name, int version, Function* function) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &entry, version, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    *function = reinterpret_cast<Function>(entry);
  }
}

// The driver's virtual memory functions (cuMemAddressReserve and the rest).
struct VirtualMemoryApi {
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                  unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;

  static VirtualMemoryApi Get() {
    VirtualMemoryApi api;
    ResolveDriver("cuMemGetAllocationGranularity", 12000, &api.granularity);
    ResolveDriver("cuMemAddressReserve", 12000, &api.reserve);
    ResolveDriver("cuMemAddressFree", 12000, &api.address_free);
    ResolveDriver("cuMemCreate", 12000, &api.create);
    ResolveDriver("cuMemRelease", 12000, &api.release);
    ResolveDriver("cuMemMap", 12000, &api.map);
    ResolveDriver("cuMemUnmap", 12000, &api.unmap);
    ResolveDriver("cuMemSetAccess", 12000, &api.set_access);
    return api;
  }
  bool ok() const {
    return granularity != nullptr && reserve != nullptr && address_free != nullptr &&
           create != nullptr && release != nullptr && map != nullptr && unmap != nullptr &&
           set_access != nullptr;
  }
};

// Memory of the stream-ordered allocator (the device's default pool, and a pool of the test's
// own) and two mappings laid end to end in one reserved range (cuMemAddressReserve + cuMemMap,
// as PyTorch's expandable segments make), with W_UV spanning both: the tail runs over them on
// both paths, with cached and with full pointer checks, and computes the reference.
TEST_F(SafetyGpuTest, PoolAndReservedRangeMemoryRun) {
  const VirtualMemoryApi vm = VirtualMemoryApi::Get();
  ASSERT_TRUE(vm.ok());
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 5);
  ASSERT_NE(problem, nullptr);
  const TailBuffers b = problem->buffers();
  const size_t latent_bytes = size_t(problem->shape().rows) * b.latent_row_stride * 2;
  const size_t output_bytes = problem->output_elements() * 2;
  const size_t w_bytes = size_t(problem->shape().heads) * b.w_head_stride * 2;
  // Each resource is given back by the cleanup made when it is obtained, whatever fails after;
  // the checks' cache, which must not outlive the memory it vouches for, is forgotten last.
  const absl::Cleanup forget = [] { mla_tail::internal::ForgetCheckedPointers(); };
  const absl::Cleanup drain = [this] { EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); };

  // The latent from the default pool, the output from a pool of the test's own.
  void* pool_latent = nullptr;
  ASSERT_EQ(cudaMallocAsync(&pool_latent, latent_bytes, stream_), cudaSuccess);
  const absl::Cleanup free_latent = [&] {
    EXPECT_EQ(cudaFreeAsync(pool_latent, stream_), cudaSuccess);
  };
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  const absl::Cleanup destroy_pool = [&] {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  };
  void* pool_output = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&pool_output, output_bytes, pool, stream_), cudaSuccess);
  const absl::Cleanup free_output = [&] {
    EXPECT_EQ(cudaFreeAsync(pool_output, stream_), cudaSuccess);
  };

  // Two mappings of one reservation, W_UV's first half in the first and its second in the other.
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  ASSERT_EQ(vm.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  const size_t chunk = (w_bytes / 2 + granularity - 1) / granularity * granularity;
  CUdeviceptr range = 0;
  ASSERT_EQ(vm.reserve(&range, 2 * chunk, 0, 0, 0), CUDA_SUCCESS);
  const absl::Cleanup free_range = [&] {
    EXPECT_EQ(vm.address_free(range, 2 * chunk), CUDA_SUCCESS);
  };
  // The mappings are unmapped and their handles released before the range is freed.
  CUmemGenericAllocationHandle handles[2] = {};
  bool created[2] = {}, mapped[2] = {};
  const absl::Cleanup unmap_and_release = [&] {
    for (int i = 0; i < 2; ++i) {
      if (mapped[i]) {
        EXPECT_EQ(vm.unmap(range + i * chunk, chunk), CUDA_SUCCESS);
      }
      if (created[i]) {
        EXPECT_EQ(vm.release(handles[i]), CUDA_SUCCESS);
      }
    }
  };
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(vm.create(&handles[i], chunk, &prop, 0), CUDA_SUCCESS);
    created[i] = true;
    ASSERT_EQ(vm.map(range + i * chunk, chunk, 0, handles[i], 0), CUDA_SUCCESS);
    mapped[i] = true;
  }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(vm.set_access(range, 2 * chunk, &access, 1), CUDA_SUCCESS);
  void* spanning_w = reinterpret_cast<void*>(range + chunk - w_bytes / 2);
  // Before any memory is given back, the stream's work on it is done.
  const absl::Cleanup drain_first = [this] {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  };

  ASSERT_EQ(cudaMemcpyAsync(pool_latent, b.latent, latent_bytes, cudaMemcpyDefault, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(spanning_w, b.w_uv, w_bytes, cudaMemcpyDefault, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  TailBuffers moved = b;
  moved.latent = static_cast<const mla_tail::bf16*>(pool_latent);
  moved.w_uv = static_cast<const mla_tail::bf16*>(spanning_w);
  moved.output = static_cast<mla_tail::bf16*>(pool_output);
  ExpectRunsOnBothPaths(*problem, moved);
}

// Every call that takes buffers refuses host memory by name, and stores or writes nothing: the
// graph set's layer keeps its buffers, a node keeps its own, ZeroPaddingLengths writes nothing;
// MlaTail::CheckBuffers says so first, as Run would, on every path and inside a capture.
TEST_F(SafetyGpuTest, EveryCallThatTakesBuffersRefuses) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 5);
  ASSERT_NE(problem, nullptr);
  const TailBuffers good = problem->buffers();
  HostBuffer host(size_t{1} << 20);
  TailBuffers bad = good;
  bad.gate = host.as<mla_tail::bf16>();

  // MlaTail::CheckBuffers.
  for (const TailPath path : {TailPath::kAuto, TailPath::kFused, TailPath::kBmm}) {
    SCOPED_TRACE(mla_tail::TailPathName(path));
    ASSERT_OK(tail_->CheckBuffers(problem->shape(), good, path));
    ExpectRefused(tail_->CheckBuffers(problem->shape(), bad, path), "gate",
                  "not memory CUDA knows");
  }
  TailBuffers misaligned = good;
  misaligned.output = good.output + 1;
  const absl::Status unaligned = tail_->CheckBuffers(problem->shape(), misaligned);
  EXPECT_EQ(unaligned.code(), absl::StatusCode::kInvalidArgument) << unaligned;
  EXPECT_EQ(unaligned, tail_->Run(problem->shape(), misaligned, stream_));
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_OK(tail_->CheckBuffers(problem->shape(), good));
  ExpectRefused(tail_->CheckBuffers(problem->shape(), bad), "gate", "not memory CUDA knows");
  cudaGraph_t checked = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &checked), cudaSuccess) << "the capture broke";
  size_t recorded = 1;
  ASSERT_EQ(cudaGraphGetNodes(checked, nullptr, &recorded), cudaSuccess);
  EXPECT_EQ(recorded, 0u) << "CheckBuffers recorded work";
  cudaGraphDestroy(checked);

  // TailGraphSet::SetLayer.
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {16};
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ExpectRefused((*set)->SetLayer(0, bad), "gate", "not memory CUDA knows");
  EXPECT_EQ((*set)->Replay(0, 16, stream_).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK((*set)->SetLayer(0, good));
  ExpectRefused((*set)->SetLayer(0, bad), "gate", "not memory CUDA knows");
  ASSERT_OK((*set)->Replay(0, 16, stream_));  // the layer kept its good buffers
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(good.output, problem->SampleRows(), true));
  ASSERT_OK(problem->PoisonOutput(good.output, stream_));

  // AddTailNode, TailNode::Update and UpdateGraph.
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  ExpectRefused(AddTailNode(*tail_, graph, {}, problem->shape(), bad).status(), "gate",
                "not memory CUDA knows");
  size_t count = 1;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 0u) << "a refused AddTailNode added a node";
  absl::StatusOr<TailNode> node = AddTailNode(*tail_, graph, {}, problem->shape(), good);
  ASSERT_TRUE(node.ok()) << node.status();
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ExpectRefused(node->Update(exec, bad), "gate", "not memory CUDA knows");
  ExpectRefused(node->UpdateGraph(bad), "gate", "not memory CUDA knows");
  EXPECT_EQ(node->buffers().gate, good.gate);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(good.output, problem->SampleRows(), true));
  ASSERT_OK(problem->PoisonOutput(good.output, stream_));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // RecordTailNode: refused inside the caller's capture, which stays valid.
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ExpectRefused(RecordTailNode(*tail_, stream_, problem->shape(), bad).status(), "gate",
                "not memory CUDA knows");
  ExpectRefused(tail_->Run(problem->shape(), bad, stream_), "gate", "not memory CUDA knows");
  cudaGraph_t captured = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &captured), cudaSuccess) << "the capture broke";
  cudaGraphDestroy(captured);

  // ZeroPaddingLengths over host memory, and over lengths too short for the bucket.
  const absl::Status zero = mla_tail::ZeroPaddingLengths(host.as<int32_t>(), 1, 16, 1, stream_);
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument) << zero;
  EXPECT_THAT(std::string(zero.message()), HasSubstr("not memory CUDA knows"));
  absl::StatusOr<DeviceMemory> few = DeviceMemory::Allocate(size_t{2} << 20);
  ASSERT_TRUE(few.ok());
  const int fits = static_cast<int>((size_t{2} << 20) / 4);  // lengths the allocation holds
  ASSERT_OK(mla_tail::ZeroPaddingLengths(few->as<int32_t>(), 0, mla_tail::kMaxRows, 1, stream_));
  const absl::Status past =
      mla_tail::ZeroPaddingLengths(few->as<int32_t>() + fits - 8, 0, 16, 1, stream_);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument) << past;
  EXPECT_THAT(std::string(past.message()), HasSubstr("bytes before"));
  ExpectUntouchedThenUsable(*problem);
}

// A node or graph-set layer passed a set of buffers it checked before (a runtime alternating two
// sets) skips that set's validation and cached pointer checks; with full pointer checks it asks
// CUDA again, so memory freed since is refused, and nothing is written.
TEST_F(SafetyGpuTest, FullChecksAskAgainForASetCheckedBefore) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 6);
  ASSERT_NE(problem, nullptr);
  const TailBuffers b = problem->buffers();
  const size_t latent_bytes = size_t{16} * b.latent_row_stride * 2;
  void* latent = nullptr;
  ASSERT_EQ(cudaMalloc(&latent, latent_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(latent, b.latent, latent_bytes, cudaMemcpyDeviceToDevice, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  TailBuffers a = b;
  a.latent = static_cast<const mla_tail::bf16*>(latent);

  NodeAndLayer n;
  ASSERT_NO_FATAL_FAILURE(MakeNodeAndLayer(*full_, *problem, a, &n));
  for (int i = 0; i < 4; ++i) {  // both sets, twice each
    const TailBuffers& x = i % 2 == 0 ? b : a;
    ASSERT_OK(n.node.Update(n.exec, x));
    ASSERT_OK(n.set->SetLayer(0, x));
    ASSERT_OK(n.set->Replay(0, 16, stream_));
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(problem->Check(b.output, problem->SampleRows(), true));
    ASSERT_OK(problem->PoisonOutput(b.output, stream_));
  }
  ASSERT_OK(n.node.Update(n.exec, b));
  ASSERT_OK(n.set->SetLayer(0, b));
  ASSERT_EQ(cudaFree(latent), cudaSuccess);
  ExpectLatentRefused(n, a, "not memory CUDA knows");
  ExpectKeptAndRunning(n, *problem);
}

// With cached checks a set checked before skips its checks only while the cache still holds what
// they found: once the cache forgets (memory freed and its range taken by a new allocation, the
// cache full, ForgetCheckedPointers) the node and the layer ask CUDA again, so memory freed since
// is refused and nothing is written.
TEST_F(SafetyGpuTest, ASetCheckedBeforeIsCheckedAgainOnceTheCacheForgets) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 7);
  ASSERT_NE(problem, nullptr);
  const TailBuffers b = problem->buffers();
  const size_t latent_bytes = size_t{16} * b.latent_row_stride * 2;
  NodeAndLayer n;
  ASSERT_NO_FATAL_FAILURE(MakeNodeAndLayer(*tail_, *problem, b, &n));

  // Set a (the latent copied into an allocation of its own) passes on both, then b again.
  auto set_a = [&](void** latent) {
    ASSERT_EQ(cudaMalloc(latent, latent_bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(*latent, b.latent, latent_bytes, cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
    TailBuffers a = b;
    a.latent = static_cast<const mla_tail::bf16*>(*latent);
    ASSERT_OK(n.node.Update(n.exec, a));
    ASSERT_OK(n.set->SetLayer(0, a));
    ASSERT_OK(n.node.Update(n.exec, b));
    ASSERT_OK(n.set->SetLayer(0, b));
  };
  auto with_latent = [&](const void* latent) {
    TailBuffers a = b;
    a.latent = static_cast<const mla_tail::bf16*>(latent);
    return a;
  };

  // The cache forgotten: a's latent, freed since, is asked about again.
  void* latent = nullptr;
  ASSERT_NO_FATAL_FAILURE(set_a(&latent));
  ASSERT_EQ(cudaFree(latent), cudaSuccess);
  mla_tail::internal::ForgetCheckedPointers();
  ExpectLatentRefused(n, with_latent(latent), "not memory CUDA knows");

  // a's latent freed and a smaller allocation at its address checked by another call: the cache
  // drops a's range, and a's set runs past the new allocation's end. CUDA need not hand the same
  // address out again; where it does not, this part checks nothing.
  ASSERT_NO_FATAL_FAILURE(set_a(&latent));
  ASSERT_EQ(cudaFree(latent), cudaSuccess);
  void* smaller = nullptr;
  ASSERT_EQ(cudaMalloc(&smaller, latent_bytes / 2), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(smaller, 0, latent_bytes / 2, stream_), cudaSuccess);
  if (smaller == latent) {
    TailBuffers in_smaller = b;
    in_smaller.lengths = static_cast<const int32_t*>(smaller);
    ASSERT_OK(tail_->Run(problem->shape(), in_smaller, stream_));
    ExpectLatentRefused(n, with_latent(latent), "allocation ends at");
  } else {
    std::printf("[ INFO     ] the smaller allocation is at another address: not checked\n");
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_EQ(cudaFree(smaller), cudaSuccess);
  ExpectKeptAndRunning(n, *problem);
}

// ZeroPaddingLengths is bounded like every call: no bucket past kMaxRows, q within [1, 64].
TEST_F(SafetyGpuTest, ZeroPaddingLengthsIsBounded) {
  absl::StatusOr<DeviceMemory> lengths = DeviceMemory::Allocate(size_t{1} << 20);
  ASSERT_TRUE(lengths.ok());
  int32_t* l = lengths->as<int32_t>();
  for (const auto& [rows, bucket, q] :
       std::vector<std::tuple<int, int, int>>{{0, mla_tail::kMaxRows + 1, 1},
                                              {0, 1 << 30, 1},
                                              {0, 2147483584, 64},
                                              {-1, 16, 1},
                                              {0, 16, 0},
                                              {0, 128, 128},
                                              {17, 16, 1},
                                              {1, 16, 2}}) {
    const absl::Status s = mla_tail::ZeroPaddingLengths(l, rows, bucket, q, stream_);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << rows << " " << bucket << " " << q << ": " << s;
  }
  EXPECT_EQ(mla_tail::ZeroPaddingLengths(reinterpret_cast<int32_t*>(lengths->as<char>() + 2), 0, 16,
                                         1, stream_)
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// With q > 1 the lengths are a request's: ZeroPaddingLengths(l, 28, 40, 2) zeroes requests 14-19
// (rows 28-39) and nothing else, neither the requests before nor a word after the bucket's 20.
TEST_F(SafetyGpuTest, ZeroPaddingLengthsWritesTheBucketsRequests) {
  absl::StatusOr<DeviceMemory> lengths = DeviceMemory::Allocate(24 * sizeof(int32_t));
  ASSERT_TRUE(lengths.ok());
  std::vector<int32_t> words(24);
  for (int i = 0; i < 24; ++i) words[i] = 100 + i;
  ASSERT_EQ(cudaMemcpyAsync(lengths->get(), words.data(), words.size() * sizeof(int32_t),
                            cudaMemcpyHostToDevice, stream_),
            cudaSuccess);
  ASSERT_OK(mla_tail::ZeroPaddingLengths(lengths->as<int32_t>(), 28, 40, 2, stream_));
  std::vector<int32_t> after(24);
  ASSERT_EQ(cudaMemcpyAsync(after.data(), lengths->get(), after.size() * sizeof(int32_t),
                            cudaMemcpyDeviceToHost, stream_),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(after[i], i >= 14 && i < 20 ? 0 : 100 + i) << "request " << i;
  }
}

// The caller's pending CUDA error survives the pointer queries, a refusal among them.
TEST_F(SafetyGpuTest, TheCallersPendingErrorSurvivesPointerChecks) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 6);
  ASSERT_NE(problem, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  HostBuffer host(size_t{1} << 20);
  TailBuffers bad = problem->buffers();
  bad.latent = host.as<mla_tail::bf16>();
  void* unused = nullptr;
  // The caller's own failed call: cudaErrorMemoryAllocation left pending.
  ASSERT_EQ(cudaMalloc(&unused, ~size_t{0}), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  ExpectRefused(full_->Run(problem->shape(), bad, stream_), "latent", "not memory CUDA knows");
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  ASSERT_OK(full_->Run(problem->shape(), problem->buffers(), stream_));
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
  ASSERT_OK(mla_tail::ZeroPaddingLengths(const_cast<int32_t*>(problem->buffers().lengths), 8, 16, 1,
                                         stream_));
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The pointer queries (every call asking CUDA, refusals included) are legal while another thread
// captures in Global mode: each call returns what it would otherwise, and that capture ends
// intact.
TEST_F(SafetyGpuTest, PointerChecksLeaveAnotherThreadsCaptureIntact) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 7);
  ASSERT_NE(problem, nullptr);
  absl::StatusOr<DeviceMemory> scratch = DeviceMemory::Allocate(4096);
  ASSERT_TRUE(scratch.ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  HostBuffer host(size_t{1} << 20);
  TailBuffers bad = problem->buffers();
  bad.output = host.as<mla_tail::bf16>();
  {
    CaptureOnAnotherThread other(scratch->get());
    ASSERT_OK(full_->Run(problem->shape(), problem->buffers(), stream_));
    ExpectRefused(full_->Run(problem->shape(), bad, stream_), "output", "not memory CUDA knows");
    ASSERT_OK(mla_tail::ZeroPaddingLengths(const_cast<int32_t*>(problem->buffers().lengths), 8, 16,
                                           1, stream_));
    EXPECT_EQ(other.Finish(), cudaSuccess) << "the pointer checks broke another thread's capture";
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// With two GPUs: memory of the other device is refused by every call, before anything runs.
TEST_F(SafetyGpuTest, MemoryOfAnotherDeviceIsRefused) {
  MLA_REQUIRE_GPUS_OR_SKIP(2);
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 8);
  ASSERT_NE(problem, nullptr);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, size_t{4} << 20), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (const auto& [name, b] : EachBufferReplaced(problem->buffers(), other)) {
    SCOPED_TRACE(name);
    ExpectRefused(tail_->Run(problem->shape(), b, stream_), name, "memory of device 1");
    ExpectRefused(tail_->PrepareBmm(problem->shape(), b), name, "memory of device 1");
    ExpectRefused(full_->Run(problem->shape(), b, stream_, TailPath::kBmm), name,
                  "memory of device 1");
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
    ExpectRefused(AddTailNode(*tail_, graph, {}, problem->shape(), b).status(), name,
                  "memory of device 1");
    cudaGraphDestroy(graph);
    if (std::string(name) != "output") ExpectUntouchedThenUsable(*problem);
  }
  // ZeroPaddingLengths runs on the device of its lengths, whatever is current, and refuses a
  // stream of another device.
  ASSERT_OK(mla_tail::ZeroPaddingLengths(static_cast<int32_t*>(other), 0, 16, 1, nullptr));
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);
  EXPECT_EQ(mla_tail::ZeroPaddingLengths(static_cast<int32_t*>(other), 0, 16, 1, stream_).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaFree(other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// A capture of the caller's that is already invalid (the caller's own prohibited call broke it)
// is FailedPrecondition from every call that records into it, not Aborted: retrying cannot help.
TEST_F(SafetyGpuTest, TheCallersInvalidatedCaptureIsFailedPrecondition) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 9);
  ASSERT_NE(problem, nullptr);
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 1;
  options.buckets = {16};
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, problem->buffers()));
  ASSERT_OK((*set)->CaptureAll());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  // The caller's prohibited synchronisation invalidates its own capture.
  EXPECT_NE(cudaStreamSynchronize(stream_), cudaSuccess);
  cudaGetLastError();
  const std::vector<std::pair<const char*, absl::Status>> calls = {
      {"MlaTail::Run", tail_->Run(problem->shape(), problem->buffers(), stream_)},
      {"MlaTail::Run (BMM)",
       tail_->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm)},
      {"TailGraphSet::Replay", (*set)->Replay(0, 16, stream_)},
      {"RecordTailNode",
       RecordTailNode(*tail_, stream_, problem->shape(), problem->buffers()).status()},
      {"ZeroPaddingLengths",
       mla_tail::ZeroPaddingLengths(const_cast<int32_t*>(problem->buffers().lengths), 8, 16, 1,
                                    stream_)},
  };
  for (const auto& [call, status] : calls) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << call << ": " << status;
    EXPECT_FALSE(mla_tail::IsStickyCudaError(status)) << call;
  }
  cudaGraph_t graph = nullptr;
  EXPECT_NE(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
  ExpectUntouchedThenUsable(*problem);
}

// Handles of another graph: an exec not instantiated from the node's graph, a dependency that is
// a node of another graph. Both InvalidArgument (the caller's mistake), nothing changed.
TEST_F(SafetyGpuTest, HandlesOfAnotherGraphAreInvalidArgument) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 10);
  ASSERT_NE(problem, nullptr);
  const TailBuffers b = problem->buffers();
  cudaGraph_t first = nullptr, second = nullptr;
  ASSERT_EQ(cudaGraphCreate(&first, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphCreate(&second, 0), cudaSuccess);
  absl::StatusOr<TailNode> in_first = AddTailNode(*tail_, first, {}, problem->shape(), b);
  absl::StatusOr<TailNode> in_second = AddTailNode(*tail_, second, {}, problem->shape(), b);
  ASSERT_TRUE(in_first.ok() && in_second.ok());

  // A dependency of another graph.
  const absl::Status foreign =
      AddTailNode(*tail_, second, {in_first->node()}, problem->shape(), b).status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kInvalidArgument) << foreign;
  EXPECT_THAT(std::string(foreign.message()), HasSubstr("dependency 0 is not a node of"));
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(second, nullptr, &count), cudaSuccess);
  EXPECT_EQ(count, 1u);

  // An exec of another graph.
  cudaGraphExec_t exec_second = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec_second, second, 0), cudaSuccess);
  const absl::Status wrong_exec = in_first->Update(exec_second, b);
  EXPECT_EQ(wrong_exec.code(), absl::StatusCode::kInvalidArgument) << wrong_exec;
  EXPECT_THAT(std::string(wrong_exec.message()), HasSubstr("exec was not instantiated"));
  EXPECT_TRUE(mla_tail::CudaErrorOf(wrong_exec).has_value()) << wrong_exec;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_OK(in_second->Update(exec_second, b));
  ASSERT_EQ(cudaGraphLaunch(exec_second, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(b.output, problem->SampleRows(), true));

  // An exec of the node's graph instantiated before the node was added.
  cudaGraph_t third = nullptr;
  cudaGraphExec_t exec_before = nullptr;
  ASSERT_EQ(cudaGraphCreate(&third, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec_before, third, 0), cudaSuccess);
  absl::StatusOr<TailNode> in_third = AddTailNode(*tail_, third, {}, problem->shape(), b);
  ASSERT_TRUE(in_third.ok()) << in_third.status();
  const absl::Status before = in_third->Update(exec_before, b);
  EXPECT_EQ(before.code(), absl::StatusCode::kInvalidArgument) << before;
  EXPECT_THAT(std::string(before.message()), HasSubstr("exec was not instantiated"));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  cudaGraphExecDestroy(exec_before);
  cudaGraphExecDestroy(exec_second);
  cudaGraphDestroy(first);
  cudaGraphDestroy(second);
  cudaGraphDestroy(third);
}

// The driver functions a test calls to make and inspect contexts (the library's own come
// through the same entry points).
struct ContextApi {
  CUresult (*create)(CUcontext*, CUctxCreateParams*, unsigned int, CUdevice) = nullptr;
  CUresult (*destroy)(CUcontext) = nullptr;
  CUresult (*get_current)(CUcontext*) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;

  static ContextApi Get() {
    ContextApi api;
    ResolveDriver("cuCtxCreate", 13000, &api.create);
    ResolveDriver("cuCtxDestroy", 12000, &api.destroy);
    ResolveDriver("cuCtxGetCurrent", 12000, &api.get_current);
    ResolveDriver("cuCtxSetCurrent", 12000, &api.set_current);
    return api;
  }
  bool ok() const {
    return create != nullptr && destroy != nullptr && get_current != nullptr &&
           set_current != nullptr;
  }
};

// Makes `context` current again when it goes, however the test ends (for the tests after it).
struct RestoreContext {
  const ContextApi& api;
  CUcontext context;
  ~RestoreContext() { api.set_current(context); }
};

// A context the caller made (not the primary one) is current again after every call. With a
// context of the instance's own device current, the calls run in it (docs/spec.md, "Contexts"):
// an MlaTail created there, the caller's stream and buffers of that context, computing the tail
// on both paths (the BMM path with a cuBLASLt handle of that context).
// With another device's context current (two GPUs), the calls of device 0's instance run in its
// primary context, on that context's stream and buffers, and switch back.
TEST_F(SafetyGpuTest, TheCallersContextStaysCurrent) {
  const ContextApi api = ContextApi::Get();
  ASSERT_TRUE(api.ok());
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 11);  // the primary context's
  ASSERT_NE(problem, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  CUcontext primary = nullptr;
  ASSERT_EQ(api.get_current(&primary), CUDA_SUCCESS);
  // The primary context current again however the test ends, for the tests after it.
  const RestoreContext restore{api, primary};

  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  for (int device = 0; device < std::min(devices, 2); ++device) {
    SCOPED_TRACE(absl::StrCat("a context of device ", device, " current"));
    CUcontext mine = nullptr;
    ASSERT_EQ(api.create(&mine, nullptr, 0, device), CUDA_SUCCESS);  // made current
    auto expect_mine = [&](const char* after) {
      CUcontext current = nullptr;
      ASSERT_EQ(api.get_current(&current), CUDA_SUCCESS);
      EXPECT_EQ(current, mine) << after << " left another context current";
    };
    if (device == 0) {
      // The instance's own device: everything made in the caller's context, used there.
      cudaStream_t own = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), cudaSuccess);
      {
        ProblemOptions options;
        options.shape = {12, 16, 1};
        options.seed = 12;
        absl::StatusOr<std::unique_ptr<Problem>> in_mine = Problem::Create(options, own);
        ASSERT_TRUE(in_mine.ok()) << in_mine.status();
        std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(false);
        ASSERT_NE(tail, nullptr);
        expect_mine("MlaTail::Create");
        const TailBuffers b = (*in_mine)->buffers();
        // The BMM path here: cuBLASLt's handle is made in, and used in, this context.
        ASSERT_OK(tail->Run((*in_mine)->shape(), b, own, TailPath::kBmm));
        expect_mine("MlaTail::Run (BMM)");
        ASSERT_EQ(cudaStreamSynchronize(own), cudaSuccess);
        ASSERT_OK((*in_mine)->Check(b.output, (*in_mine)->SampleRows(), true));
        ASSERT_OK((*in_mine)->PoisonOutput(b.output, own));
        ASSERT_OK(tail->Run((*in_mine)->shape(), b, own));
        expect_mine("MlaTail::Run");
        // After the run in stream order: the output holds what the run computed.
        ASSERT_OK(mla_tail::ZeroPaddingLengths(const_cast<int32_t*>(b.lengths), 8, 16, 1, own));
        expect_mine("ZeroPaddingLengths");
        ASSERT_EQ(cudaStreamSynchronize(own), cudaSuccess);
        ASSERT_OK((*in_mine)->Check(b.output, (*in_mine)->SampleRows(), true));
        tail.reset();
        expect_mine("~MlaTail");
      }
      ASSERT_EQ(cudaStreamDestroy(own), cudaSuccess);
    } else {
      // Another device's context: device 0's instance runs in device 0's primary context.
      ASSERT_OK(tail_->Run(problem->shape(), problem->buffers(), stream_));
      expect_mine("MlaTail::Run");
      EXPECT_EQ(tail_->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm).code(),
                absl::StatusCode::kOk);
      expect_mine("MlaTail::Run (BMM)");
      ASSERT_OK(mla_tail::ZeroPaddingLengths(const_cast<int32_t*>(problem->buffers().lengths), 8,
                                             16, 1, stream_));
      expect_mine("ZeroPaddingLengths");
      std::unique_ptr<mla_tail::MlaTail> created = MakeTail(false);
      EXPECT_NE(created, nullptr);
      expect_mine("MlaTail::Create");
      created.reset();
      expect_mine("~MlaTail");
    }
    EXPECT_EQ(tail_->Run(problem->shape(), {}, stream_).code(), absl::StatusCode::kInvalidArgument);
    expect_mine("a refused MlaTail::Run");
    ASSERT_EQ(api.set_current(primary), CUDA_SUCCESS);
    ASSERT_EQ(api.destroy(mine), CUDA_SUCCESS);
    if (device != 0) {
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
    }
  }

  // A thread with no context current (a new thread, whose runtime device is 0 until it sets
  // one) has none after each call, and its runtime device is the one it had: the last device's
  // instance works there without binding a context to the thread.
  const int last = std::min(devices, 2) - 1;
  std::unique_ptr<mla_tail::MlaTail> on_last = MakeTail(false, last);
  ASSERT_NE(on_last, nullptr);
  std::vector<std::string> failures;
  std::thread([&] {
    auto expect_none = [&](const char* after) {
      CUcontext current = nullptr;
      int runtime_device = -1;
      if (api.get_current(&current) != CUDA_SUCCESS || current != nullptr) {
        failures.push_back(absl::StrCat(after, " left a context current"));
      }
      if (cudaGetDevice(&runtime_device) != cudaSuccess || runtime_device != 0) {
        failures.push_back(
            absl::StrCat(after, " changed the runtime's device to ", runtime_device));
      }
    };
    expect_none("nothing");
    if (last == 0) {  // the problem's buffers are device 0's
      const absl::Status run = on_last->Run(problem->shape(), problem->buffers(), stream_);
      if (!run.ok()) failures.push_back(run.ToString());
      expect_none("MlaTail::Run");
      const absl::Status zeroed = mla_tail::ZeroPaddingLengths(
          const_cast<int32_t*>(problem->buffers().lengths), 8, 16, 1, stream_);
      if (!zeroed.ok()) failures.push_back(zeroed.ToString());
      expect_none("ZeroPaddingLengths");
    }
    const absl::Status refused = on_last->Run(problem->shape(), {}, stream_);
    if (refused.code() != absl::StatusCode::kInvalidArgument) {
      failures.push_back(refused.ToString());
    }
    expect_none("a refused MlaTail::Run");
    std::unique_ptr<mla_tail::MlaTail> created = MakeTail(false, last);
    if (created == nullptr) failures.push_back("MlaTail::Create failed");
    expect_none("MlaTail::Create");
    created.reset();
    expect_none("~MlaTail");
  }).join();
  EXPECT_THAT(failures, testing::IsEmpty());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// An instance used in another context of its device (a runtime's own, a green context), where
// CUDA loads the kernels at their first launch: every fused kernel, the tile kernels and
// Persistent128x128 with more than 48 KB of shared memory among them, runs there and computes
// the tail (`Create` gives the kernels their attributes for the whole device).
TEST_F(SafetyGpuTest, EveryKernelRunsInAnotherContextOfTheDevice) {
  const ContextApi api = ContextApi::Get();
  ASSERT_TRUE(api.ok());
  CUcontext primary = nullptr;
  ASSERT_EQ(api.get_current(&primary), CUDA_SUCCESS);
  std::vector<std::pair<mla_tail::FusedKernel, std::unique_ptr<mla_tail::MlaTail>>> tails;
  for (mla_tail::FusedKernel kernel : mla_tail::kFusedKernels) {
    mla_tail::TailOptions options;
    options.bmm = false;
    options.fused_kernel = kernel;
    absl::StatusOr<std::unique_ptr<mla_tail::MlaTail>> tail =
        mla_tail::MlaTail::Create(0, options);  // in the primary context
    ASSERT_TRUE(tail.ok()) << tail.status();
    tails.emplace_back(kernel, *std::move(tail));
  }
  CUcontext mine = nullptr;
  ASSERT_EQ(api.create(&mine, nullptr, 0, 0), CUDA_SUCCESS);  // made current
  // The primary context current again and this one gone however the test ends; what was made in
  // it is destroyed before it.
  const absl::Cleanup restore = [&] {
    EXPECT_EQ(api.set_current(primary), CUDA_SUCCESS);
    EXPECT_EQ(api.destroy(mine), CUDA_SUCCESS);
  };
  cudaStream_t own = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), cudaSuccess);
  const absl::Cleanup destroy_stream = [&] { EXPECT_EQ(cudaStreamDestroy(own), cudaSuccess); };
  ProblemOptions options;
  options.shape = {12, 64, 1};
  options.seed = 29;
  absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, own);
  ASSERT_TRUE(problem.ok()) << problem.status();
  const TailBuffers b = (*problem)->buffers();
  for (const auto& [kernel, tail] : tails) {
    SCOPED_TRACE(mla_tail::FusedKernelName(kernel));
    ASSERT_OK((*problem)->PoisonOutput(b.output, own));
    ASSERT_OK(tail->Run((*problem)->shape(), b, own));
    ASSERT_EQ(cudaStreamSynchronize(own), cudaSuccess);
    EXPECT_OK((*problem)->Check(b.output, (*problem)->SampleRows(), true));
  }
}

// Holds a stream's later work until Release() (or 20 s pass): a blocking host function.
class StreamGate {
 public:
  ~StreamGate() { Release(); }
  cudaError_t Close(cudaStream_t stream) { return cudaLaunchHostFunc(stream, &Wait, this); }
  void Release() { open_.store(true); }

 private:
  static void Wait(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!gate->open_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::atomic<bool> open_{false};
};

// What may run at once (tail_graph_set.h): replays of different graphs of a fused-path set on
// different streams run at once; replays of one graph never do, whatever the streams (CUDA runs
// one launch of an executable graph at a time, each after the one before).
TEST_F(SafetyGpuTest, OnlyDifferentGraphsOfASetRunAtOnce) {
  std::unique_ptr<Problem> first = MakeProblem(12, 16, 12);
  std::unique_ptr<Problem> second = MakeProblem(12, 16, 13);
  ASSERT_TRUE(first != nullptr && second != nullptr);
  GraphSetOptions options;
  options.heads = 12;
  options.layers = 2;
  options.buckets = {16};
  options.path = TailPath::kFused;
  absl::StatusOr<std::unique_ptr<TailGraphSet>> set = TailGraphSet::Create(0, options);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_OK((*set)->SetLayer(0, first->buffers()));
  ASSERT_OK((*set)->SetLayer(1, second->buffers()));
  ASSERT_OK((*set)->CaptureAll());
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  // Layer 0's graph held behind a closed stream; layer 1's graph on another stream runs.
  {
    StreamGate gate;
    ASSERT_EQ(gate.Close(stream_), cudaSuccess);
    ASSERT_OK((*set)->Replay(0, 16, stream_));
    ASSERT_OK((*set)->Replay(1, 16, other));
    ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(stream_), cudaErrorNotReady) << "the gate did not hold";
    ASSERT_OK(second->Check(second->buffers().output, second->SampleRows(), true));
    gate.Release();
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(first->Check(first->buffers().output, first->SampleRows(), true));
  }
  ASSERT_OK(first->PoisonOutput(first->buffers().output, stream_));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  // Layer 0's graph held; its replay on another stream waits for the held launch.
  {
    StreamGate gate;
    ASSERT_EQ(gate.Close(stream_), cudaSuccess);
    ASSERT_OK((*set)->Replay(0, 16, stream_));
    ASSERT_OK((*set)->Replay(0, 16, other));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(cudaStreamQuery(other), cudaErrorNotReady)
        << "a replay of one graph ran while its earlier launch was held";
    gate.Release();
    ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_OK(first->Check(first->buffers().output, first->SampleRows(), true));
  }
  cudaStreamDestroy(other);
}

// Instances made in a context the caller then destroys release nothing when they go, even where
// a new context takes the destroyed one's address: a context is known by its ID, which no later
// context reuses. The successor's stream, event and memory (made where the instances' were) are
// untouched by the destructors, and no CUDA error is left. Contexts are made until one takes the
// old address, or 16 were made (then the destructors run with the old context simply gone).
TEST_F(SafetyGpuTest, InstancesOfADestroyedContextReleaseNothingInItsSuccessor) {
  const ContextApi api = ContextApi::Get();
  ASSERT_TRUE(api.ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  CUcontext primary = nullptr;
  ASSERT_EQ(api.get_current(&primary), CUDA_SUCCESS);
  const RestoreContext restore{api, primary};

  CUcontext first = nullptr;
  ASSERT_EQ(api.create(&first, nullptr, 0, 0), CUDA_SUCCESS);  // made current
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(false);
  ASSERT_NE(tail, nullptr);
  std::unique_ptr<TailGraphSet> set;
  {
    cudaStream_t own = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), cudaSuccess);
    ProblemOptions options;
    options.shape = {12, 16, 1};
    options.seed = 14;
    absl::StatusOr<std::unique_ptr<Problem>> problem = Problem::Create(options, own);
    ASSERT_TRUE(problem.ok()) << problem.status();
    ASSERT_OK(tail->PrepareBmm((*problem)->shape(), (*problem)->buffers()));
    ASSERT_OK(tail->Run((*problem)->shape(), (*problem)->buffers(), own, TailPath::kBmm));
    GraphSetOptions set_options;
    set_options.heads = 12;
    set_options.layers = 1;
    set_options.buckets = {16};
    set_options.path = TailPath::kBmm;
    absl::StatusOr<std::unique_ptr<TailGraphSet>> made = TailGraphSet::Create(0, set_options);
    ASSERT_TRUE(made.ok()) << made.status();
    set = *std::move(made);
    ASSERT_OK(set->SetLayer(0, (*problem)->buffers()));
    ASSERT_OK(set->CaptureAll());
    ASSERT_OK(set->Replay(0, 16, own));
    ASSERT_EQ(cudaStreamSynchronize(own), cudaSuccess);
    ASSERT_OK((*problem)->Check((*problem)->buffers().output, (*problem)->SampleRows(), true));
    problem->reset();
    ASSERT_EQ(cudaStreamDestroy(own), cudaSuccess);
  }
  ASSERT_EQ(api.set_current(primary), CUDA_SUCCESS);
  ASSERT_EQ(api.destroy(first), CUDA_SUCCESS);

  std::vector<CUcontext> others;
  CUcontext successor = nullptr;
  while (successor == nullptr && others.size() < 16) {
    CUcontext made = nullptr;
    ASSERT_EQ(api.create(&made, nullptr, 0, 0), CUDA_SUCCESS);
    if (made == first) {
      successor = made;
    } else {
      others.push_back(made);
    }
  }
  auto destroy_others = absl::MakeCleanup([&] {
    api.set_current(primary);
    for (CUcontext c : others) api.destroy(c);
  });
  SCOPED_TRACE(successor != nullptr ? "a new context took the destroyed context's address"
                                    : "no new context took the destroyed context's address");
  CUcontext current = successor != nullptr ? successor : others.back();
  ASSERT_EQ(api.set_current(current), CUDA_SUCCESS);
  // The successor's objects, made where the instances' were made.
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  void* memory = nullptr;
  constexpr size_t kBytes = 1 << 20;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&memory, kBytes, stream), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(memory, 0x5a, kBytes, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  tail.reset();
  set.reset();
  CUcontext after = nullptr;
  ASSERT_EQ(api.get_current(&after), CUDA_SUCCESS);
  EXPECT_EQ(after, current) << "a destructor left another context current";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess) << "the successor's stream was destroyed";
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess) << "the successor's event was destroyed";
  std::vector<unsigned char> host(kBytes);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), memory, kBytes, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(std::count(host.begin(), host.end(), 0x5a), static_cast<std::ptrdiff_t>(kBytes))
      << "the successor's memory was freed or written";
  ASSERT_EQ(cudaFreeAsync(memory, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(event), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  if (successor != nullptr) {
    ASSERT_EQ(api.set_current(primary), CUDA_SUCCESS);
    ASSERT_EQ(api.destroy(successor), CUDA_SUCCESS);
  }
}

// The BMM scratch comes from the instance's own memory pool: with the device full and a block
// the caller freed in stream order behind held work (which a shared pool could hand out, making
// the allocation wait for that work), PrepareBmm returns (OK or ResourceExhausted) without
// waiting for the caller's stream.
TEST_F(SafetyGpuTest, PreparingTheBmmPathWithTheDeviceFullWaitsForNoStreamOfTheCallers) {
  std::unique_ptr<Problem> problem = MakeProblem(12, 16, 15);
  ASSERT_NE(problem, nullptr);
  {
    // cuBLASLt loaded and this context's handle made while memory is free.
    std::unique_ptr<mla_tail::MlaTail> warm = MakeTail(false);
    ASSERT_NE(warm, nullptr);
    ASSERT_OK(warm->PrepareBmm(problem->shape(), problem->buffers()));
  }
  std::unique_ptr<mla_tail::MlaTail> tail = MakeTail(false);
  ASSERT_NE(tail, nullptr);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  StreamGate gate;
  ASSERT_EQ(gate.Close(stream_), cudaSuccess);
  void* freed_behind_the_gate = nullptr;
  ASSERT_EQ(cudaMallocAsync(&freed_behind_the_gate, size_t{256} << 20, stream_), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(freed_behind_the_gate, stream_), cudaSuccess);
  // The device filled: 1 GiB blocks, then 64 MiB, then 4 MiB, until none more fits.
  std::vector<void*> filler;
  for (size_t block : {size_t{1} << 30, size_t{64} << 20, size_t{4} << 20}) {
    for (void* p = nullptr; cudaMalloc(&p, block) == cudaSuccess; p = nullptr) {
      filler.push_back(p);
    }
  }
  (void)cudaGetLastError();  // the allocation that did not fit
  auto free_filler = absl::MakeCleanup([&] {
    for (void* p : filler) cudaFree(p);
  });
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::seconds(8));
    gate.Release();
  });
  const auto start = std::chrono::steady_clock::now();
  const absl::Status prepared = tail->PrepareBmm(problem->shape(), problem->buffers());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  gate.Release();
  opener.join();
  EXPECT_TRUE(prepared.ok() || prepared.code() == absl::StatusCode::kResourceExhausted) << prepared;
  EXPECT_LT(seconds, 4.0) << "PrepareBmm waited for the caller's held stream";
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  std::move(free_filler).Invoke();
  // Memory free again: the same instance prepares and runs the BMM path.
  ASSERT_OK(tail->PrepareBmm(problem->shape(), problem->buffers()));
  ASSERT_OK(tail->Run(problem->shape(), problem->buffers(), stream_, TailPath::kBmm));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  ASSERT_OK(problem->Check(problem->buffers().output, problem->SampleRows(), true));
}

}  // namespace
}  // namespace mla_tail_testing

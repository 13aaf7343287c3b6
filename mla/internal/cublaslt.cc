#include "mla/internal/cublaslt.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mla/internal/fault_hooks.h"
#include "mla_tail_cuda/library_dir.h"

namespace mla_tail::internal {
namespace {

#define MLA_TAIL_STRINGIFY_(x) #x
#define MLA_TAIL_STRINGIFY(x) MLA_TAIL_STRINGIFY_(x)
// The soname of the cuBLASLt whose headers the library was compiled against.
constexpr char kSoname[] = "libcublasLt.so." MLA_TAIL_STRINGIFY(CUBLAS_VER_MAJOR);

absl::Status Unavailable(absl::string_view why) {
  return absl::FailedPreconditionError(absl::StrCat("the BMM path needs cuBLASLt (", kSoname,
                                                    "), which could not be loaded: ", why));
}

}  // namespace

std::vector<std::string> CublasLtCandidates() {
  return {kSoname, absl::StrCat(MLA_TAIL_CUDA_LIBRARY_DIR, "/", kSoname)};
}

absl::StatusOr<CublasLtApi> LoadCublasLt(const std::vector<std::string>& candidates) {
  std::vector<std::string> failures;
  for (const std::string& path : candidates) {
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* error = dlerror();
      failures.push_back(error != nullptr ? error : absl::StrCat(path, ": not loaded"));
      continue;
    }
    CublasLtApi api;
    std::vector<const char*> missing;
#define MLA_TAIL_CUBLASLT_RESOLVE(name)                                   \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(library, #name)); \
  if (api.name == nullptr) missing.push_back(#name);
    MLA_TAIL_CUBLASLT_FUNCTIONS(MLA_TAIL_CUBLASLT_RESOLVE)
#undef MLA_TAIL_CUBLASLT_RESOLVE
    if (missing.empty()) return api;  // kept loaded: its functions serve the whole process
    dlclose(library);
    failures.push_back(absl::StrCat(path, " lacks ", absl::StrJoin(missing, ", ")));
  }
  return Unavailable(absl::StrJoin(failures, "; "));
}

absl::StatusOr<const CublasLtApi*> CublasLt() {
  const FaultHooks& faults = ActiveFaultHooks();
  if (faults.cublaslt_missing && faults.cublaslt_missing()) {
    return Unavailable("fault injected (FaultHooks::cublaslt_missing)");
  }
  static std::mutex mutex;
  static const CublasLtApi* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded == nullptr) {
    absl::StatusOr<CublasLtApi> api = LoadCublasLt(CublasLtCandidates());
    if (!api.ok()) return api.status();
    loaded = new CublasLtApi(*api);
  }
  return loaded;
}

}  // namespace mla_tail::internal

#ifndef MLA_TAIL_MLA_INTERNAL_CUBLASLT_H_
#define MLA_TAIL_MLA_INTERNAL_CUBLASLT_H_

// cuBLASLt, loaded on the BMM path's first use: its functions are resolved from
// libcublasLt.so.<cuBLAS major> with dlopen, so that a program that never takes the BMM path
// neither needs the library to start nor loads it. Not part of the public API.

#include <cublasLt.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mla_tail::internal {

// The cuBLASLt functions the library calls.
#define MLA_TAIL_CUBLASLT_FUNCTIONS(X)    \
  X(cublasLtCreate)                       \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtMatmul)                       \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)

// One member per function, named and typed as cuBLASLt declares it: `lt.cublasLtMatmul(...)`.
struct CublasLtApi {
#define MLA_TAIL_CUBLASLT_MEMBER(name) decltype(&::name) name = nullptr;
  MLA_TAIL_CUBLASLT_FUNCTIONS(MLA_TAIL_CUBLASLT_MEMBER)
#undef MLA_TAIL_CUBLASLT_MEMBER
};

// The library files tried, in order: the soname (found as the dynamic loader finds libraries:
// LD_LIBRARY_PATH, the program's RUNPATH, the loader's cache, libraries already loaded), then
// the same file in the lib64 directory of the CUDA toolkit the library was built with.
std::vector<std::string> CublasLtCandidates();

// The process's cuBLASLt: loaded on the first call that succeeds, then kept (never unloaded).
// FailedPrecondition naming each file tried and why when none loads (or, in tests, when
// FaultHooks::cublaslt_missing says so); a later call tries again.
absl::StatusOr<const CublasLtApi*> CublasLt();

// Loads the first of `candidates` that opens and has every function; not cached (tests).
absl::StatusOr<CublasLtApi> LoadCublasLt(const std::vector<std::string>& candidates);

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_CUBLASLT_H_

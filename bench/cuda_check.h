#ifndef MLA_TAIL_BENCH_CUDA_CHECK_H_
#define MLA_TAIL_BENCH_CUDA_CHECK_H_

// The probes' check of a CUDA runtime call: on an error, prints where, the call and the error
// to stderr and exits with status 1 (a probe holds nothing that the process's exit does not
// release).

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#define CUDA_CHECK(call)                                                \
  do {                                                                  \
    const cudaError_t cuda_check_error_ = (call);                       \
    if (cuda_check_error_ != cudaSuccess) {                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(cuda_check_error_));              \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

#endif  // MLA_TAIL_BENCH_CUDA_CHECK_H_

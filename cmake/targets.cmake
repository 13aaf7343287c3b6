# Generated from the Bazel targets by //cmake:targets (tools/update_cmake_targets.sh): do not
# edit. //cmake:targets_test fails when this file and the Bazel targets differ.

# tools/cuda/defs.bzl: every nvcc flag of the project.
set(MLA_TAIL_NVCC_FLAGS "-std=c++17" "-O3" "-lineinfo" "-Xcompiler=-fPIC" "-Xcompiler=-O2" "-Xptxas=-warn-spills" "--expt-relaxed-constexpr" "-Werror=all-warnings" "-gencode=arch=compute_90a,code=sm_90a")

# The public targets (mla_tail::<name>); every other library is internal.
set(MLA_TAIL_PUBLIC_TARGETS "//graph:buckets" "//graph:tail_graph_set" "//graph:tail_node" "//mla:dispatch" "//mla:errors" "//mla:padding" "//mla:tail" "//mla:tail_args")

mla_tail_library(//graph:buckets
  KIND cc
  PACKAGE "graph"
  INCLUDE_PREFIX "mla_tail/graph"
  SRCS "graph/buckets.cc"
  HDRS "graph/buckets.h"
  DEPS "//mla:tail_args" "absl::span" "absl::status" "absl::statusor" "absl::strings")

mla_tail_library(//graph:tail_graph_set
  KIND cc
  PACKAGE "graph"
  INCLUDE_PREFIX "mla_tail/graph"
  SRCS "graph/tail_graph_set.cc"
  HDRS "graph/tail_graph_set.h"
  DEPS "//graph:buckets" "//mla:cuda_status" "//mla:device_guard" "//mla:fault_hooks" "//mla:padding" "//mla:pointer_checks" "//mla:recent_buffers" "//mla:tail" "//mla:tail_access" "//mla:tail_args" "//mla:tail_extents" "//mla:tail_kernel_node" "CUDA::cudart_static" "absl::status" "absl::statusor" "absl::str_format" "absl::strings" "absl::time")

mla_tail_library(//graph:tail_node
  KIND cc
  PACKAGE "graph"
  INCLUDE_PREFIX "mla_tail/graph"
  SRCS "graph/tail_node.cc"
  HDRS "graph/tail_node.h"
  DEPS "//mla:cuda_status" "//mla:device_guard" "//mla:dispatch" "//mla:kernels" "//mla:pointer_checks" "//mla:recent_buffers" "//mla:tail" "//mla:tail_access" "//mla:tail_args" "//mla:tail_kernel_node" "CUDA::cudart_static" "absl::span" "absl::status" "absl::statusor" "absl::strings")

mla_tail_library(//mla:cublaslt
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/cublaslt.cc"
  HDRS "mla/internal/cublaslt.h"
  LINKOPTS "-ldl"
  DEPS "//mla:fault_hooks" "absl::status" "absl::statusor" "absl::strings" "mla_tail_cuda_headers" "mla_tail_cuda_library_dir")

mla_tail_library(//mla:cuda_status
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/cuda_status.cc"
  HDRS "mla/internal/cuda_status.h"
  DEPS "//mla:errors" "CUDA::cudart_static" "absl::cord" "absl::status" "absl::statusor" "absl::strings")

mla_tail_library(//mla:device_guard
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/device_guard.cc"
  HDRS "mla/internal/device_guard.h"
  DEPS "//mla:cuda_status" "//mla:driver" "CUDA::cudart_static" "absl::status" "absl::statusor" "absl::strings")

mla_tail_library(//mla:dispatch
  KIND cc
  PACKAGE "mla"
  INCLUDE_PREFIX "mla_tail/mla"
  SRCS "mla/dispatch.cc"
  HDRS "mla/dispatch.h"
  DEPS "//mla:tail_args")

mla_tail_library(//mla:driver
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/driver.cc"
  HDRS "mla/internal/driver.h"
  DEPS "CUDA::cudart_static")

mla_tail_library(//mla:errors
  KIND cc
  PACKAGE "mla"
  INCLUDE_PREFIX "mla_tail/mla"
  SRCS "mla/errors.cc"
  HDRS "mla/errors.h" "mla/version.h"
  DEPS "absl::cord" "absl::status" "absl::strings" "mla_tail_cuda_headers")

mla_tail_library(//mla:fault_hooks
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/fault_hooks.cc"
  HDRS "mla/internal/fault_hooks.h"
  DEPS "mla_tail_cuda_headers")

mla_tail_library(//mla:kernels
  KIND cuda
  PACKAGE "mla"
  SRCS "mla/kernels/bmm_gate.cu" "mla/kernels/bmm_pointers.cu" "mla/kernels/column_split.cu" "mla/kernels/device.cuh" "mla/kernels/early_sigmoids.cuh" "mla/kernels/fp8.cuh" "mla/kernels/fused_kernels.h" "mla/kernels/latent_split.cu" "mla/kernels/launch.cu" "mla/kernels/mbarrier.cuh" "mla/kernels/persistent_128x128.cu" "mla/kernels/prefetch.cuh" "mla/kernels/sm90.h" "mla/kernels/tile.cu" "mla/kernels/tile_copy.cuh" "mla/kernels/timeline_stamps.cuh" "mla/kernels/wgmma.cuh"
  HDRS "mla/kernels/device.cuh" "mla/kernels/fp8.cuh" "mla/kernels/launch.h" "mla/kernels/mbarrier.cuh" "mla/kernels/params.h"
  DEPS "//mla:dispatch" "//mla:fault_hooks" "//mla:tail_args" "CUDA::cudart_static")

mla_tail_library(//mla:padding
  KIND cc
  PACKAGE "mla"
  INCLUDE_PREFIX "mla_tail/mla"
  SRCS "mla/padding.cc"
  HDRS "mla/padding.h"
  DEPS "//mla:cuda_status" "//mla:device_guard" "//mla:driver" "//mla:pointer_checks" "//mla:tail_args" "CUDA::cudart_static" "absl::status" "absl::statusor" "absl::str_format" "absl::strings")

mla_tail_library(//mla:pointer_checks
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/pointer_checks.cc"
  HDRS "mla/internal/checked_ranges.h" "mla/internal/pointer_checks.h"
  DEPS "//mla:cuda_status" "//mla:driver" "//mla:errors" "//mla:tail_args" "//mla:tail_extents" "CUDA::cudart_static" "absl::inlined_vector" "absl::span" "absl::status" "absl::str_format" "absl::strings")

mla_tail_library(//mla:recent_buffers
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/recent_buffers.cc"
  HDRS "mla/internal/recent_buffers.h"
  DEPS "//mla:tail_args")

mla_tail_library(//mla:tail
  KIND cc
  PACKAGE "mla"
  INCLUDE_PREFIX "mla_tail/mla"
  SRCS "mla/internal/tail_access.h" "mla/tail.cc"
  HDRS "mla/tail.h"
  DEPS "//mla:cublaslt" "//mla:cuda_status" "//mla:device_guard" "//mla:dispatch" "//mla:errors" "//mla:kernels" "//mla:pointer_checks" "//mla:tail_args" "//mla:tail_kernel_node" "//mla:value_bmm" "absl::cleanup" "absl::flat_hash_map" "absl::status" "absl::statusor" "absl::strings" "mla_tail_cuda_headers")

mla_tail_library(//mla:tail_access
  KIND cc
  PACKAGE "mla"
  HDRS "mla/internal/tail_access.h"
  DEPS "//mla:kernels" "//mla:pointer_checks" "//mla:tail" "//mla:tail_args" "//mla:tail_kernel_node" "absl::status" "absl::statusor")

mla_tail_library(//mla:tail_args
  KIND cc
  PACKAGE "mla"
  INCLUDE_PREFIX "mla_tail/mla"
  SRCS "mla/internal/tail_extents.h" "mla/tail_args.cc"
  HDRS "mla/tail_args.h"
  DEPS "absl::inlined_vector" "absl::status" "absl::str_format" "absl::strings" "mla_tail_cuda_headers")

mla_tail_library(//mla:tail_extents
  KIND cc
  PACKAGE "mla"
  HDRS "mla/internal/tail_extents.h"
  DEPS "//mla:tail_args")

mla_tail_library(//mla:tail_kernel_node
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/tail_kernel_node.cc"
  HDRS "mla/internal/tail_kernel_node.h"
  DEPS "//mla:cuda_status" "//mla:fault_hooks" "//mla:kernels" "//mla:tail_args" "CUDA::cudart_static" "absl::status" "absl::statusor" "absl::strings")

mla_tail_library(//mla:value_bmm
  KIND cc
  PACKAGE "mla"
  SRCS "mla/internal/value_bmm.cc"
  HDRS "mla/internal/value_bmm.h"
  DEPS "//mla:cublaslt" "//mla:cuda_status" "//mla:errors" "//mla:fault_hooks" "//mla:tail_args" "absl::status" "absl::statusor" "absl::strings" "mla_tail_cuda_headers")

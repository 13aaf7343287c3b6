#!/usr/bin/env bash
# Builds and checks every way a runtime takes mla_tail, as CI (tools/test.sh) and the GPU
# staging (tools/stage_gpu.sh) need them, without a GPU:
#   - examples/runtime/, a Bazel workspace that uses mla_tail as @mla_tail: the runtime (a
#     static executable), plugin/libtail_plugin.so (a shared library) and plugin/plugin_host
#     (loads it with dlopen);
#   - examples/cmake_consumer/ with CMake, once with add_subdirectory(mla-tail) and once with
#     find_package(mla_tail) from an install of that build (in .cmake_build/), and once more with
#     find_package and CMake's own build-tree search path (no toolkit directory may be in it).
# Checks: each build succeeds without a warning; readelf -d shows no libcublasLt, no search path
# but $ORIGIN, and an RPATH $ORIGIN wherever Abseil's shared libraries are needed; the plugin's
# header compiles as C; the host loads the plugin and each program (the runtime, also with its
# heads split over two devices, the plugin host, the CMake consumer) runs: FailedPrecondition (no
# usable GPU) ends them cleanly here, a GPU runs and checks them (the two-device runtime skips
# where fewer than two GPUs are usable). Quiet unless something fails.
#
#   tools/build_consumers.sh [bazel build flags for examples/runtime...]
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0

fail() {  # message [log]
  echo "build_consumers: $1" >&2
  [ -z "${2:-}" ] || cat "$2" >&2
  failed=1
}

# A build's log must hold no warning (compiler, nvcc, CMake or Bazel).
quiet() {  # what
  if grep -qi 'warning' "$log"; then fail "$1 printed warnings:" "$log"; return 1; fi
}

# readelf -d: no libcublasLt (loaded at run time, on the BMM path's first use); no search path
# other than $ORIGIN (nothing is looked up in the toolkit); where Abseil's shared libraries are
# needed, an RPATH (not a RUNPATH, which would not serve their own dependencies) $ORIGIN, so that
# copies beside the binary serve a machine without Abseil.
check_dynamic() {  # file
  local dynamic
  dynamic=$(readelf -d "$1")
  if grep -q 'NEEDED.*libcublasLt' <<<"$dynamic"; then fail "$1 needs libcublasLt"; fi
  if grep -E '\((RUNPATH|RPATH)\)' <<<"$dynamic" | grep -vq '\[\$ORIGIN\]$'; then
    fail "$1 has a search path other than \$ORIGIN: $(grep -E 'RUNPATH|RPATH' <<<"$dynamic")"
  fi
  if grep -q 'NEEDED.*libabsl_' <<<"$dynamic" &&
     ! grep -qE '\(RPATH\) +Library rpath: \[\$ORIGIN\]$' <<<"$dynamic"; then
    fail "$1 needs Abseil's shared libraries but has no RPATH \$ORIGIN"
  fi
}

# Runs a consumer program: it must exit 0, having passed (PASS) or, without a usable GPU,
# having been refused by the library with FailedPrecondition (or, for the runtime on two devices,
# having found fewer usable GPUs than it names).
check_run() {  # what command...
  local what=$1 output
  shift
  if ! output=$("$@" 2>&1); then
    fail "$what failed:"
    echo "$output" >&2
  elif ! tail -n 1 <<<"$output" |
       grep -qE '^PASS$|^SKIP \(no usable GPU\): .*FAILED_PRECONDITION|^SKIP \(fewer usable GPUs'; then
    fail "$what ended without PASS or FailedPrecondition:"
    echo "$output" >&2
  elif [ "$(tail -n 1 <<<"$output")" = PASS ]; then
    echo "  $what: PASS"
  elif tail -n 1 <<<"$output" | grep -q '^SKIP (fewer usable GPUs'; then
    echo "  $what: fewer usable GPUs than it names, clean exit"
  else
    echo "  $what: FailedPrecondition (no usable GPU), clean exit"
  fi
}

# The Bazel consumer workspace.
runtime=examples/runtime
if ! (cd "$runtime" && bazel build //... "$@") >"$log" 2>&1; then
  fail "$runtime: build failed:" "$log"
elif quiet "$runtime"; then
  bin=$runtime/bazel-bin
  for f in runtime plugin/libtail_plugin.so plugin/plugin_host; do check_dynamic "$bin/$f"; done
  exported=$(nm -D --defined-only "$bin/plugin/libtail_plugin.so" | awk '{print $3}' |
             grep -v '^tail_plugin_' || true)
  [ -z "$exported" ] || fail "libtail_plugin.so exports more than tail_plugin_*: $exported"
  echo "build_consumers: $runtime (Bazel): runtime, plugin/libtail_plugin.so, plugin/plugin_host"
  check_run "runtime --check" "$bin/runtime" --check
  check_run "runtime --check --devices=0,1 --heads=24" "$bin/runtime" --check --devices=0,1 \
    --heads=24
  check_run "plugin_host loading libtail_plugin.so" "$bin/plugin/plugin_host" \
    "$bin/plugin/libtail_plugin.so"
fi

# The plugin's C interface is C as well as C++ (C11, as CUDA's headers need): a host in C
# includes it.
cuda=${CUDA_PATH:-/usr/local/cuda}
if ! gcc -x c -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$cuda/include" \
     "$runtime/plugin/tail_plugin.h" >"$log" 2>&1; then
  fail "$runtime/plugin/tail_plugin.h does not compile as C:" "$log"
else
  echo "build_consumers: $runtime/plugin/tail_plugin.h compiles as C"
fi

# CMake: add_subdirectory(mla-tail) (its install rules on), then find_package(mla_tail) from that
# build's install.
cmake_build=$root/.cmake_build
consumer=examples/cmake_consumer
jobs=$(nproc 2>/dev/null || echo 2)
cmake_form() {  # name configure-arguments...
  local name=$1
  shift
  if ! { cmake -S "$consumer" -B "$cmake_build/$name" -DCMAKE_BUILD_TYPE=Release "$@" &&
         cmake --build "$cmake_build/$name" --parallel "$jobs"; } >"$log" 2>&1; then
    fail "$consumer with $name: build failed:" "$log"
    return 1
  fi
  quiet "$consumer with $name" || return 1
  # The build-tree search path form is checked on its own (below).
  [ "$name" = find_package_build_rpath ] || check_dynamic "$cmake_build/$name/cmake_consumer"
}
install_package() {
  rm -rf "$cmake_build/install"
  if ! cmake --install "$cmake_build/add_subdirectory" --prefix "$cmake_build/install" \
       >"$log" 2>&1; then
    fail "installing mla_tail from the add_subdirectory build failed:" "$log"
    return 1
  fi
}
if cmake_form add_subdirectory -DMLA_TAIL_SOURCE_DIR="$root" -DMLA_TAIL_INSTALL=ON &&
   install_package &&
   cmake_form find_package -DMLA_TAIL_SOURCE_DIR= \
     -Dmla_tail_DIR="$cmake_build/install/lib/cmake/mla_tail"; then
  echo "build_consumers: $consumer (CMake): add_subdirectory, install, find_package"
  for form in add_subdirectory find_package; do
    check_run "cmake_consumer ($form)" "$cmake_build/$form/cmake_consumer"
  done
  # CMake's own build-tree search path (no RPATH setting of the consumer's): the package's
  # targets carry no link directory of the toolkit, so none of its directories is in it.
  if cmake_form find_package_build_rpath -DMLA_TAIL_SOURCE_DIR= \
       -Dmla_tail_DIR="$cmake_build/install/lib/cmake/mla_tail" -DCONSUMER_ORIGIN_RPATH=OFF; then
    toolkit=$(readlink -f "$cuda")
    paths=$(readelf -d "$cmake_build/find_package_build_rpath/cmake_consumer" |
            grep -E '\((RUNPATH|RPATH)\)' || true)
    if grep -qE "$cuda|$toolkit" <<<"$paths"; then
      fail "cmake_consumer's build-tree search path names the toolkit: $paths"
    else
      echo "build_consumers: $consumer (CMake): build-tree search path without the toolkit"
    fi
  fi
fi

# Under add_subdirectory without MLA_TAIL_INSTALL, the consumer's install installs nothing of
# mla-tail's (configured only: with no install rules nothing needs building).
rm -rf "$cmake_build/no_install" "$cmake_build/no_install_prefix"
if ! { cmake -S "$consumer" -B "$cmake_build/no_install" -DCMAKE_BUILD_TYPE=Release \
         -DMLA_TAIL_SOURCE_DIR="$root" &&
       cmake --install "$cmake_build/no_install" --prefix "$cmake_build/no_install_prefix"; } \
     >"$log" 2>&1; then
  fail "$consumer with add_subdirectory and MLA_TAIL_INSTALL off: configure or install failed:" \
    "$log"
elif [ -n "$(find "$cmake_build/no_install_prefix" -type f 2>/dev/null)" ]; then
  fail "add_subdirectory with MLA_TAIL_INSTALL off installed files:" \
    <(find "$cmake_build/no_install_prefix" -type f)
else
  echo "build_consumers: $consumer (CMake): add_subdirectory installs nothing by default"
fi

[ $failed -eq 0 ] || echo "build_consumers: FAILED" >&2
exit $failed

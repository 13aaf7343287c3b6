#!/usr/bin/env bash
# Builds the GPU tests, benchmarks, the demo and the consumers here and stages them, with a
# runner, in a git-ignored folder, so that a GPU machine without Bazel runs the whole GPU suite
# with one command:
#
#   tools/stage_gpu.sh [STAGE_DIR]          # default .gpu_stage
#   STAGE_DIR/run.sh --help                 # on the GPU machine: the tests
#   STAGE_DIR/benchmarks.sh --help          # and every benchmark the README quotes
set -euo pipefail
# The stage path as the caller gave it (relative to the caller's directory), then this script's
# checkout, whatever the caller's directory is.
stage=${1:-}
if [ -n "$stage" ]; then
  mkdir -p "$stage"
  stage=$(cd "$stage" && pwd)
fi
cd "$(dirname "$0")/.."
stage=${stage:-$PWD/.gpu_stage}

# Bazel's progress and INFO lines only when the build fails.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! bazel build //... >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
tests=$(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
binaries=$(bazel query 'attr(tags, "\bgpu_bench\b", kind("cc_binary", //...))' 2>/dev/null)

rm -rf "$stage"
mkdir -p "$stage/tests" "$stage/bin" "$stage/scripts"
label_path() { local l=${1#//}; echo "bazel-bin/${l%%:*}/${l##*:}"; }
# Staged by name alone: two targets of one name in different packages would overwrite each other.
stage_file() {  # file dir
  if [ -e "$2/$(basename "$1")" ]; then
    echo "stage_gpu.sh: two staged targets are named $(basename "$1")" >&2
    exit 1
  fi
  cp "$1" "$2/"
}
for t in $tests; do stage_file "$(label_path "$t")" "$stage/tests"; done
for b in $binaries; do stage_file "$(label_path "$b")" "$stage/bin"; done
# The consumers, built against this checkout (tools/build_consumers.sh): the runtime of
# examples/runtime/ in bin/; in consumers/, the shared-library plugin with its host and the CMake
# consumer, beside the Abseil shared libraries they need (their RPATH is $ORIGIN), as a
# deployment ships them to a machine without Abseil.
if ! tools/build_consumers.sh >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
cp examples/runtime/bazel-bin/runtime "$stage/bin/example_runtime"
mkdir -p "$stage/consumers"
cp examples/runtime/bazel-bin/plugin/libtail_plugin.so examples/runtime/bazel-bin/plugin/plugin_host \
  .cmake_build/add_subdirectory/cmake_consumer "$stage/consumers/"
chmod u+w "$stage"/tests/* "$stage"/bin/* "$stage"/consumers/*
for f in "$stage"/consumers/*; do
  ldd "$f" | awk '$1 ~ /^libabsl_/ { print $3 }'
done | sort -u | while read -r library; do
  cp -L "$library" "$stage/consumers/"
done
chmod u+w "$stage"/consumers/*
strip "$stage"/tests/* "$stage"/bin/*
strip --strip-unneeded "$stage"/consumers/*
# Every Abseil library a staged consumer loads, directly or through another, resolves to the
# staged copy (this machine has Abseil installed; the GPU machine need not).
staged=$(cd "$stage/consumers" && pwd)
for f in "$staged"/plugin_host "$staged"/libtail_plugin.so "$staged"/cmake_consumer; do
  elsewhere=$(ldd "$f" | awk '$1 ~ /^libabsl_/ && index($3, "'"$staged"'/") != 1 { print $1 " => " $3 }')
  if [ -n "$elsewhere" ]; then
    echo "stage_gpu: $(basename "$f") loads Abseil from outside the stage:" >&2
    echo "$elsewhere" >&2
    exit 1
  fi
done
cp bench/*.py "$stage/scripts/" || exit 1
cp tools/gpu_suite.sh "$stage/run.sh"
cp tools/gpu_benchmarks.sh "$stage/benchmarks.sh"
# Dirty with any change to the sources, untracked files included (a glob may build them), the
# stage itself aside where it lies in the checkout.
exclude=()
case $stage in "$PWD"/*) exclude=(":!${stage#"$PWD"/}") ;; esac
changes=$(git status --porcelain -- . ':!bench/results' "${exclude[@]}")
{
  echo "commit $(git rev-parse --short HEAD)$([ -z "$changes" ] || echo '-dirty')"
  echo "staged $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "tests: $(ls "$stage/tests" | tr '\n' ' ')"
  echo "binaries: $(ls "$stage/bin" | tr '\n' ' ')"
  echo "consumers: $(ls "$stage/consumers" | tr '\n' ' ')"
} >"$stage/MANIFEST"
du -sh "$stage"
cat "$stage/MANIFEST"

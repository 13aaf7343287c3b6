#!/usr/bin/env bash
# Builds the GPU tests, benchmarks and the demo here and stages them, with a runner, in a
# git-ignored folder, so that a GPU machine without Bazel runs the whole GPU suite with one
# command:
#
#   tools/stage_gpu.sh [STAGE_DIR]          # default .gpu_stage
#   STAGE_DIR/run.sh --help                 # on the GPU machine: the tests
#   STAGE_DIR/benchmarks.sh --help          # and every benchmark the README quotes
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
stage=${1:-.gpu_stage}

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
for t in $tests; do cp "$(label_path "$t")" "$stage/tests/"; done
for b in $binaries; do cp "$(label_path "$b")" "$stage/bin/"; done
# The consumer workspace's runtime (examples/runtime/), built against this checkout.
if ! examples/runtime/build.sh >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
cp examples/runtime/bazel-bin/runtime "$stage/bin/example_runtime"
chmod u+w "$stage"/tests/* "$stage"/bin/*
strip "$stage"/tests/* "$stage"/bin/*
cp bench/*.py "$stage/scripts/" 2>/dev/null || true
cp tools/gpu_suite.sh "$stage/run.sh"
cp tools/gpu_benchmarks.sh "$stage/benchmarks.sh"
{
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo '-dirty')"
  echo "staged $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "tests: $(ls "$stage/tests" | tr '\n' ' ')"
  echo "binaries: $(ls "$stage/bin" | tr '\n' ' ')"
} >"$stage/MANIFEST"
du -sh "$stage"
cat "$stage/MANIFEST"

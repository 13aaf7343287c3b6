#!/usr/bin/env bash
# Builds the consumer workspace (a runtime that uses mla_tail as @mla_tail through
# mla_tail_dependencies()) with its own Bazel output base. Quiet unless the build fails.
#
#   examples/runtime/build.sh [bazel build flags...]
#
# The binary: examples/runtime/bazel-bin/runtime (run it on a GPU machine: see README.md).
set -uo pipefail
cd "$(dirname "$0")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! bazel build //... "$@" >"$log" 2>&1; then
  cat "$log" >&2
  echo "examples/runtime: build failed" >&2
  exit 1
fi
echo "examples/runtime: built $(pwd)/bazel-bin/runtime"

#!/usr/bin/env bash
# Regenerates cmake/targets.cmake, the CMake build's target list, from the Bazel targets
# (//cmake:targets); //cmake:targets_test fails until the file is regenerated after a change to
# the libraries' sources, headers, options or dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."  # this script's checkout, whatever the caller's directory
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! bazel build //cmake:targets >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
cp -f bazel-bin/cmake/targets.generated.cmake cmake/targets.cmake
chmod u+w cmake/targets.cmake
echo "cmake/targets.cmake: $(grep -c '^mla_tail_library(' cmake/targets.cmake) libraries"

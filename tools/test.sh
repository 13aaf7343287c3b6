#!/usr/bin/env bash
# The README's test command: installs what a fresh Debian 12 machine lacks, then builds and runs
# every test, then builds and checks every consumer form (tools/build_consumers.sh: the Bazel
# workspace examples/runtime/ with its shared-library plugin, and examples/cmake_consumer/ with
# CMake). GPU tests skip without a GPU (and fail instead with
# MLA_TAIL_REQUIRE_GPU=1); the closing line counts test cases, skipped ones apart, and counts a
# failed build as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1
bazel test //... "$@"
status=$?
tools/build_consumers.sh || status=1
passed=0 failed=0 skipped=0
for xml in $(find -L bazel-testlogs/ -name test.xml 2>/dev/null); do
  read -r tests failures < <(sed -n 's/.*<testsuites tests="\([0-9]*\)" failures="\([0-9]*\)".*/\1 \2/p' "$xml")
  skips=$(grep -c '<skipped' "$xml" || true)
  passed=$((passed + ${tests:-0} - ${failures:-0} - skips))
  failed=$((failed + ${failures:-0}))
  skipped=$((skipped + skips))
done
# test.xml files of tests that did not build this time are stale: a failed status with no
# failed case still reports a failure.
[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit $status

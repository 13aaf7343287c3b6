#!/usr/bin/env bash
# The README's test command: installs what a fresh Debian 12 machine with the CUDA 13 toolkit
# lacks (tools/setup.sh; in a git checkout), then builds every target and runs every test that
# can run here, then builds and checks every consumer form
# (tools/build_consumers.sh: the Bazel workspace examples/runtime/ with its shared-library plugin,
# and examples/cmake_consumer/ with CMake), then checks the sources' format
# (tools/check_format.sh). Tests tagged gpu
# run where nvidia-smi lists a GPU, or where MLA_TAIL_REQUIRE_GPU asks for one (they then fail
# without it); elsewhere they are built but not run, and listed as "not run (no GPU)", never
# counted as passed. The closing line counts the test cases of this run only (the targets Bazel
# reports for this invocation, cached verdicts included, and their test.xml), skipped ones
# apart, and counts a failed build or a target without a verdict as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

gpu_tests_run=1
filters=()
# A GPU is required where either variable asks for one (the tests read both: testing/support/gpu.h).
required=0
case ${MLA_TAIL_REQUIRE_GPU:-0} in ''|0) ;; *) required=1 ;; esac
[[ ${MLA_TAIL_REQUIRE_GPUS:-0} =~ ^[1-9][0-9]*$ ]] && required=1
# Counted, not grep -q: an early exit of grep would end nvidia-smi with SIGPIPE under pipefail.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -eq 0 ] && [ "$required" = 0 ]; then
  gpu_tests_run=0
  filters=(--test_tag_filters=-gpu)
  echo "test.sh: no GPU here: tests tagged gpu are built, not run"
else
  # One test at a time on the GPU (the tests that fill the device would fail the others), and the
  # GPU requirements passed into the tests' environment (Bazel starts tests with a clean one).
  filters=(--local_test_jobs=1 --test_env=MLA_TAIL_REQUIRE_GPU --test_env=MLA_TAIL_REQUIRE_GPUS)
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test //... --test_summary=short "${filters[@]}" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
tools/build_consumers.sh || status=1
# Every C++ and CUDA source as .clang-format has it (tools/format.sh rewrites them); a difference
# fails the run like a failed test.
tools/check_format.sh || status=1

# Bazel's verdict of each test target of this invocation ("//pkg:name  (cached) PASSED in 0.3s",
# "FAILED", "FAILED TO BUILD", "NO STATUS", "TIMEOUT", ...): only these targets' test.xml count.
passed=0 failed=0 skipped=0
while read -r target verdict; do
  xml="bazel-testlogs/${target#//}"
  xml="${xml/://}/test.xml"
  case $verdict in
    PASSED|FLAKY|FAILED) ;;
    *)  # no run, or no complete one: no test.xml of this run to read
      echo "test.sh: $target: $verdict"
      failed=$((failed + 1))
      continue
      ;;
  esac
  if [ ! -f "$xml" ]; then
    if [ "$verdict" = FAILED ]; then failed=$((failed + 1)); else passed=$((passed + 1)); fi
    continue
  fi
  read -r tests failures < <(sed -n 's/.*<testsuites tests="\([0-9]*\)" failures="\([0-9]*\)".*/\1 \2/p' "$xml")
  # A test.xml Bazel wrote itself (a plain sh_test) has a bare <testsuites>: the target is one case.
  if [ -z "${tests:-}" ]; then
    if [ "$verdict" = FAILED ]; then failed=$((failed + 1)); else passed=$((passed + 1)); fi
    continue
  fi
  skips=$(grep -c '<skipped' "$xml" || true)
  passed=$((passed + ${tests:-0} - ${failures:-0} - skips))
  failed=$((failed + ${failures:-0}))
  skipped=$((skipped + skips))
  # A failed target whose cases all passed (a crash after them, a sanitizer exit code) fails.
  [ "$verdict" != FAILED ] || [ "${failures:-0}" != 0 ] || failed=$((failed + 1))
done < <(sed -n -E 's#^(//[^ ]+) +(\(([0-9/]+ )?cached\) )?(PASSED|FLAKY|FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|REMOTE FAILURE|SKIPPED)([ ,].*)?$#\1 \4#p' "$log")
# A failed invocation with no failed case counted (a build break before any test ran) fails.
[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1

not_run=""
if [ $gpu_tests_run = 0 ]; then
  gpu_targets=$(bazel query 'attr(tags, "\bgpu\b", tests(//...))' 2>/dev/null)
  for target in $gpu_targets; do echo "$target  not run (no GPU)"; done
  not_run="; $(echo "$gpu_targets" | grep -c .) GPU test targets not run (no GPU)"
fi
echo "${passed} passed, ${failed} failed, ${skipped} skipped${not_run}"
exit $status

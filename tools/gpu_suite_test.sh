#!/usr/bin/env bash
# The staged runner's verdicts (tools/gpu_suite.sh, staged as run.sh), without a GPU: fake test
# binaries that print what gtest prints, a fake nvidia-smi and a fake compute-sanitizer. A
# runner that records a failure as a pass (an exit in mid-run, a crash behind passed cases, a
# sanitizer that never reported) fails this test.
set -uo pipefail
runner=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

mkdir -p "$work/fakebin"
cat >"$work/fakebin/nvidia-smi" <<'SMI'
#!/usr/bin/env bash
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)" ;;
  *) echo "NVIDIA H200, 580.00, 143771 MiB" ;;
esac
SMI
# The sanitizer: runs the program, then prints its summary as compute-sanitizer does; FAKE_HAZARD
# (racecheck) adds a hazard in cuBLASLt's nvjet kernels, FAKE_NO_SUMMARY leaves the summary out.
cat >"$work/fakebin/compute-sanitizer" <<'SAN'
#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "Compute Sanitizer Version 2025.3.1.0 (fake)"; exit 0; }
tool=memcheck code=0
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --error-exitcode) code=$2; shift 2 ;;
    --report-api-errors|--print-limit) shift 2 ;;
    *) break ;;
  esac
done
echo "========= COMPUTE-SANITIZER"
"$@"
app=$?
errors=0
if [ "$tool" = racecheck ] && [ -n "${FAKE_HAZARD:-}" ]; then
  echo "========= Error: Race reported between Read access at nvjet_sm90_tst+0xa10"
  errors=1
fi
[ "$app" = 0 ] || echo "========= Target application returned an error"
[ -n "${FAKE_NO_SUMMARY:-}" ] && exit "$app"
if [ "$tool" = racecheck ]; then
  echo "========= RACECHECK SUMMARY: $errors hazards displayed ($errors errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: $errors errors"
fi
if [ "$errors" != 0 ] && [ "$code" != 0 ]; then exit "$code"; fi
exit "$app"
SAN
chmod +x "$work/fakebin/"*
export PATH="$work/fakebin:$PATH"

# A fake gtest binary: two cases, A and B, whose outcome its name picks.
write_test() {  # name kind(pass|fail|skip|exit_mid_run|crash_after)
  cat >"$2/$1" <<TEST
#!/usr/bin/env bash
kind=$3
TEST
  cat >>"$2/$1" <<'TEST'
for a in "$@"; do
  [ "$a" = --gtest_list_tests ] && { printf 'Suite.\n  A\n  B\n'; exit 0; }
done
[ -n "${TEST_PREMATURE_EXIT_FILE:-}" ] && : >"$TEST_PREMATURE_EXIT_FILE"
echo "[==========] Running 2 tests from 1 test suite."
for c in A B; do
  echo "[ RUN      ] Suite.$c"
  case $kind in
    fail) [ $c = B ] && { echo "x.cc:1: Failure"; echo "[  FAILED  ] Suite.$c (1 ms)"; continue; } ;;
    skip) echo "[  SKIPPED ] Suite.$c (0 ms)"; continue ;;
    exit_mid_run) [ $c = B ] && exit 0 ;;
  esac
  echo "[       OK ] Suite.$c (1 ms)"
done
echo "[==========] 2 tests from 1 test suite ran. (2 ms total)"
case $kind in
  fail) echo "[  PASSED  ] 1 test."; echo "[  FAILED  ] 1 test, listed below:"
        echo "[  FAILED  ] Suite.B"; rm -f "${TEST_PREMATURE_EXIT_FILE:-/nonexistent}"; exit 1 ;;
  skip) echo "[  PASSED  ] 0 tests."; echo "[  SKIPPED ] 2 tests, listed below:" ;;
  *) echo "[  PASSED  ] 2 tests." ;;
esac
rm -f "${TEST_PREMATURE_EXIT_FILE:-/nonexistent}"
[ $kind = crash_after ] && exit 139
exit 0
TEST
  chmod +x "$2/$1"
}

# A stage of one test binary of `kind`; runs run.sh with `args`; sets $rc and $summary.
run() {  # kind args...
  local kind=$1
  shift
  local stage=$work/stage.$kind.$RANDOM
  mkdir -p "$stage/tests" "$stage/bin"
  cp "$runner" "$stage/run.sh" && chmod +x "$stage/run.sh"
  echo "commit fake" >"$stage/MANIFEST"
  write_test "${kind}_gpu_test" "$stage/tests" "$kind"
  (cd "$stage" && ./run.sh --out="$stage/out" "$@" >"$stage/log" 2>&1)
  rc=$?
  summary=$(cat "$stage/out/summary.txt" 2>/dev/null)
  log=$stage/log
}

expect() {  # what expected-rc pattern-in-summary
  if [ "$rc" != "$2" ]; then fail "$1: run.sh exited $rc, not $2"; sed 's/^/    /' "$log"; fi
  if ! grep -qE "$3" <<<"$summary"; then
    fail "$1: no line matching '$3' in summary.txt"
    sed 's/^/    /' <<<"$summary"
  fi
}

run pass;          expect "cases that pass" 0 '^PASS +pass_gpu_test '
run fail;          expect "a failed case" 1 '^FAIL +fail_gpu_test '
run skip;          expect "every case skipped (nothing passed)" 1 '^SKIP +skip_gpu_test '
run exit_mid_run;  expect "an exit 0 in mid-run" 1 '^FAIL +exit_mid_run_gpu_test .*before the test program finished'
run crash_after;   expect "a crash after the cases" 1 '^FAIL +crash_after_gpu_test .*exit 139'
run pass --timeout=5m
[ "$rc" = 2 ] || fail "--timeout=5m: run.sh exited $rc, not 2"

run pass --no-tests --sanitize=memcheck
expect "memcheck, clean" 0 '^PASS +memcheck:pass_gpu_test'
FAKE_HAZARD=1 run pass --no-tests --sanitize=racecheck
expect "racecheck, hazards in nvjet only" 0 '^PASS +racecheck:pass_gpu_test'
FAKE_HAZARD=1 run crash_after --no-tests --sanitize=racecheck
expect "racecheck, nvjet hazards and a crash" 1 '^FAIL +racecheck:crash_after_gpu_test'
FAKE_NO_SUMMARY=1 run pass --no-tests --sanitize=memcheck
expect "memcheck, no summary" 1 '^FAIL +memcheck:pass_gpu_test'
run fail --no-tests --sanitize=memcheck
expect "memcheck, a failed case" 1 '^FAIL +memcheck:fail_gpu_test'

# Verdicts of an earlier run in the same folder are not counted again.
stage=$work/stage.reuse
mkdir -p "$stage/tests" "$stage/bin"
cp "$runner" "$stage/run.sh" && chmod +x "$stage/run.sh"
echo "commit fake" >"$stage/MANIFEST"
write_test pass_gpu_test "$stage/tests" pass
(cd "$stage" && ./run.sh --out="$stage/out" --no-tests --sanitize=memcheck >/dev/null 2>&1)
(cd "$stage" && ./run.sh --out="$stage/out" --no-tests --sanitize=memcheck >"$stage/log" 2>&1)
grep -qE '^pass_gpu_test +1/1$' "$stage/out/summary.txt" ||
  fail "a second run into one folder: $(grep '^pass_gpu_test' "$stage/out/summary.txt")"

if [ "$failures" != 0 ]; then
  echo "$failures failures"
  exit 1
fi
echo "gpu_suite_test: every verdict as expected"

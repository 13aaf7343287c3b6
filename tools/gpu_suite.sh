#!/usr/bin/env bash
# The staged GPU suite's runner (tools/stage_gpu.sh copies it to STAGE_DIR/run.sh). Runs every
# staged GPU test with the GPU required (MLA_TAIL_REQUIRE_GPU=1: a missing GPU fails, never
# skips), optionally under compute-sanitizer, and the benchmarks; leaves logs and summary.txt.
#
#   run.sh [--out=DIR] [--filter=GTEST_FILTER] [--sanitize[=TOOLS]] [--sanitize-filter=FILTER]
#          [--sanitize-shards=N] [--sanitize-jobs=N] [--no-tests] [--bin="NAME ARGS"]...
#     --out             where logs and summary.txt go (default $OUT, else ./gpu-results)
#     --filter          gtest filter for the plain run (default all)
#     --sanitize        also run the tests under compute-sanitizer; TOOLS defaults to
#                       memcheck,racecheck,initcheck,synccheck
#     --sanitize-filter gtest filter for the sanitizer runs (default: same as --filter)
#     --sanitize-shards split each binary's sanitizer run into N gtest shards (default 1)
#     --sanitize-jobs   sanitizer runs at once (default 1: one after another)
#     --bin="NAME ARGS" run the staged bin/NAME with ARGS after the tests (repeatable); {out} in
#                       ARGS becomes the output folder (for CSV files). Staged: tail_bench,
#                       graph_bench, decode_demo; bench/*.py are in scripts/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/gpu-results}
filter='*'
sanitize_tools=''
sanitize_filter=''
sanitize_shards=1
sanitize_jobs=1
pdl_order_tests='ReliabilityGpuTest.ControlPdlWaitSeesLateWrites:ReliabilityGpuTest.InputsWrittenUpstreamUntilItsEndAreSeen'
run_tests=1
bins=()
for arg in "$@"; do
  case $arg in
    --out=*) out=${arg#*=} ;;
    --filter=*) filter=${arg#*=} ;;
    --sanitize) sanitize_tools=memcheck,racecheck,initcheck,synccheck ;;
    --sanitize=*) sanitize_tools=${arg#*=} ;;
    --sanitize-filter=*) sanitize_filter=${arg#*=} ;;
    --sanitize-shards=*) sanitize_shards=${arg#*=} ;;
    --sanitize-jobs=*) sanitize_jobs=${arg#*=} ;;
    --no-tests) run_tests=0 ;;
    --bin=*) bins+=("${arg#*=}") ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
sanitize_filter=${sanitize_filter:-$filter}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
export MLA_TAIL_REQUIRE_GPU=1
# Tests needing more GPUs than the machine has skip; as many as it has must run.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
export MLA_TAIL_REQUIRE_GPUS=${MLA_TAIL_REQUIRE_GPUS:-$gpus}
passed=0
failed=0

record() {  # name status seconds
  printf '%-4s %-60s %6ss\n' "$2" "$1" "$3" | tee -a "$summary"
  if [ "$2" = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

run_one() {  # name log command...
  local name=$1 log=$2
  shift 2
  local start=$SECONDS
  if "$@" >"$log" 2>&1; then record "$name" PASS $((SECONDS - start))
  else
    record "$name" FAIL $((SECONDS - start))
    tail -n 40 "$log" | sed 's/^/    /'
  fi
}

cat "$here/MANIFEST" 2>/dev/null | tee -a "$summary"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$summary"

if [ "$run_tests" = 1 ]; then
  for t in "$here"/tests/*; do
    name=$(basename "$t")
    run_one "$name" "$out/$name.log" "$t" --gtest_filter="$filter"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$name.log" | sed 's/^/    /' | tee -a "$summary"
  done
fi

# One sanitizer run of one test binary (one gtest shard of it); its verdict goes to LOG.verdict.
sanitize_one() {  # tool test shard shards log
  local tool=$1 t=$2 shard=$3 shards=$4 log=$5 start=$SECONDS
  # The fault tests provoke CUDA API errors on purpose (a broken capture, memory exhausted):
  # for them only memory errors count, not the API errors the sanitizer would also report.
  local api=()
  case $(basename "$t") in fault_*) api=(--report-api-errors no) ;; esac
  # initcheck does not keep programmatic dependent launch's ordering: under it, even the
  # control test (a bare PDL-launched copy after griddepcontrol.wait) reads the upstream
  # kernel's buffers before that kernel wrote them, while every other tool and a plain run keep
  # the order. The tests that rely on that ordering are left to the other tools.
  local filter=$sanitize_filter
  if [ "$tool" = initcheck ]; then
    case $filter in *-*) filter="$filter:$pdl_order_tests" ;; *) filter="$filter-$pdl_order_tests" ;; esac
  fi
  GTEST_SHARD_INDEX=$shard GTEST_TOTAL_SHARDS=$shards \
    "$sanitizer" --tool "$tool" "${api[@]}" --print-limit 100 "$t" \
    --gtest_filter="$filter" >"$log" 2>&1
  local rc=$?
  # racecheck cannot follow the mbarrier-synchronised pipelines of cuBLASLt's own kernels
  # (nvjet*) and reports shared-memory hazards inside them (excluding those kernels from
  # instrumentation crashed the sanitizer). A hazard in any other kernel fails the run.
  local ours theirs errors="" verdict
  ours=$(grep -E '^========= (Error|Warning): Race' "$log" | grep -vc nvjet)
  theirs=$(grep -E '^========= (Error|Warning): Race' "$log" | grep -c nvjet)
  [ "$tool" = racecheck ] || errors=$(grep -E '^========= ERROR SUMMARY: [1-9]' "$log" | head -1)
  if grep -q '^\[  PASSED  \] 0 tests' "$log" && ! grep -qE '^\[  (FAILED|SKIPPED) ' "$log"; then
    verdict=NONE
  elif grep -q '^\[  PASSED  \]' "$log" && ! grep -q '^\[  FAILED  \]' "$log" \
       && [ "$ours" = 0 ] && [ -z "$errors" ]; then verdict=PASS
  else verdict=FAIL
  fi
  echo "$verdict $((SECONDS - start)) $rc $ours $theirs" >"$log.verdict"
}

if [ -n "$sanitize_tools" ]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # Every (tool, binary, shard) runs at once, at most sanitize_jobs together.
  running=0
  for tool in ${sanitize_tools//,/ }; do
    for t in "$here"/tests/*; do
      for ((shard = 0; shard < sanitize_shards; ++shard)); do
        sanitize_one "$tool" "$t" "$shard" "$sanitize_shards" \
          "$out/$tool.$(basename "$t").$shard.log" &
        running=$((running + 1))
        if [ "$running" -ge "$sanitize_jobs" ]; then wait -n; running=$((running - 1)); fi
      done
    done
  done
  wait
  for tool in ${sanitize_tools//,/ }; do
    for t in "$here"/tests/*; do
      name=$(basename "$t")
      for ((shard = 0; shard < sanitize_shards; ++shard)); do
        log=$out/$tool.$name.$shard.log
        read -r verdict seconds rc ours theirs <"$log.verdict"
        label="$tool:$name"
        [ "$sanitize_shards" = 1 ] || label="$label[$shard/$sanitize_shards]"
        if [ "$verdict" = NONE ]; then
          echo "---- $label: the filter matches no test here" | tee -a "$summary"
          continue
        fi
        record "$label" "$verdict" "$seconds"
        [ "$verdict" = PASS ] || grep -E '^=========' "$log" | head -40 | sed 's/^/    /'
        grep -cE '^\[       OK \]' "$log" | sed 's/^/    tests passed: /' | tee -a "$summary"
        echo "    exit $rc; hazards in our kernels: $ours; in cuBLASLt (nvjet): $theirs" | tee -a "$summary"
        grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | sed 's/^/    /' | tee -a "$summary"
      done
    done
  done
fi

for spec in "${bins[@]}"; do
  name=${spec%% *}
  args=""
  [ "$name" = "$spec" ] || args=${spec#* }
  args=${args//\{out\}/$out}
  if [ ! -x "$here/bin/$name" ]; then record "$name" FAIL 0; echo "    not staged: bin/$name"; continue; fi
  # shellcheck disable=SC2086
  run_one "$name" "$out/$name.log" "$here/bin/$name" $args
  tail -n 60 "$out/$name.log"
done

echo "gpu suite: $passed passed, $failed failed" | tee -a "$summary"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# The staged GPU suite's runner (tools/stage_gpu.sh copies it to STAGE_DIR/run.sh). Runs every
# staged GPU test with the GPU required (MLA_TAIL_REQUIRE_GPU=1: a missing GPU fails, never
# skips), optionally under compute-sanitizer, and with --bin any staged binary (the benchmarks
# are benchmarks.sh's); leaves logs and summary.txt.
# Every verdict (a binary, a test case, a sanitizer run) is appended to summary.txt the moment
# it is known, so a run cut short by a time limit keeps what it finished.
#
#   run.sh [--out=DIR] [--filter=GTEST_FILTER] [--binaries=LIST] [--skip-binaries=LIST]
#          [--profile=full|sanitize] [--timeout=S]
#          [--sanitize[=TOOLS]] [--sanitize-filter=FILTER] [--sanitize-shards=N|case]
#          [--sanitize-jobs=N] [--sanitize-profile] [--no-tests] [--bin="NAME ARGS"]...
#     --out             where logs and summary.txt go (default $OUT, else ./gpu-results)
#     --filter          gtest filter for the plain run (default all)
#     --binaries        only these staged test binaries (comma-separated names; default all)
#     --skip-binaries   not these (comma-separated names), e.g. to split a sanitizer run by
#                       binary over several time-limited calls
#     --profile         MLA_TAIL_TEST_PROFILE for every test run (testing/support/gpu.h): full (default)
#                       or sanitize (smaller shapes and loops, every code path still run)
#     --timeout         stop any one test binary or sanitizer run after S seconds (it fails)
#     --sanitize        also run the tests under compute-sanitizer; TOOLS defaults to
#                       memcheck,racecheck,initcheck,synccheck
#     --sanitize-filter gtest filter for the sanitizer runs (default: same as --filter)
#     --sanitize-shards split each binary's sanitizer run into N gtest shards (default 1), or
#                       run each test case on its own (case)
#     --sanitize-jobs   sanitizer runs at once (default 1: one after another). Tests that fill
#                       the device (*DeviceFull*, *DeviceMemoryExhausted*) always run alone,
#                       after the others.
#     --sanitize-profile  every test under all four tools (about 15 minutes on one H200, racecheck
#                       11 of them: split it by tool or binary to fit a time limit):
#                       --profile=sanitize --sanitize --sanitize-shards=case --no-tests
#                       --sanitize-jobs=<CPU cores> --timeout=300 (flags given as well win);
#                       ends with a table of the runs by binary and tool
#     --no-tests        no plain run of the tests
#     --bin="NAME ARGS" run the staged bin/NAME with ARGS after the tests (repeatable); {out} in
#                       ARGS becomes the output folder (for CSV files). Staged: tail_bench,
#                       every gpu_bench binary and example_runtime (MANIFEST lists them);
#                       bench/*.py are in scripts/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/gpu-results}
filter='*'
profile=''
timeout_s=''
sanitize_tools=''
sanitize_filter=''
sanitize_shards=''
sanitize_jobs=''
sanitize_profile=0
run_tests=''
only_binaries=''
skip_binaries=''
bins=()
for arg in "$@"; do
  case $arg in
    --out=*) out=${arg#*=} ;;
    --filter=*) filter=${arg#*=} ;;
    --binaries=*) only_binaries=${arg#*=} ;;
    --skip-binaries=*) skip_binaries=${arg#*=} ;;
    --profile=*) profile=${arg#*=} ;;
    --timeout=*) timeout_s=${arg#*=} ;;
    --sanitize) sanitize_tools=memcheck,racecheck,initcheck,synccheck ;;
    --sanitize=*) sanitize_tools=${arg#*=} ;;
    --sanitize-filter=*) sanitize_filter=${arg#*=} ;;
    --sanitize-shards=*) sanitize_shards=${arg#*=} ;;
    --sanitize-jobs=*) sanitize_jobs=${arg#*=} ;;
    --sanitize-profile) sanitize_profile=1 ;;
    --no-tests) run_tests=0 ;;
    --bin=*) bins+=("${arg#*=}") ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [ "$sanitize_profile" = 1 ]; then
  profile=${profile:-sanitize}
  sanitize_tools=${sanitize_tools:-memcheck,racecheck,initcheck,synccheck}
  sanitize_shards=${sanitize_shards:-case}
  sanitize_jobs=${sanitize_jobs:-$(nproc 2>/dev/null || echo 16)}
  timeout_s=${timeout_s:-300}
  run_tests=${run_tests:-0}
fi
sanitize_filter=${sanitize_filter:-$filter}
sanitize_shards=${sanitize_shards:-1}
sanitize_jobs=${sanitize_jobs:-1}
timeout_s=${timeout_s:-0}
run_tests=${run_tests:-1}
[[ $timeout_s =~ ^[0-9]+$ ]] || { echo "run.sh: --timeout=$timeout_s: give whole seconds" >&2; exit 2; }
case $profile in
  ''|full|sanitize) ;;
  *) echo "run.sh: unknown profile $profile (full or sanitize)" >&2; exit 2 ;;
esac
[ -z "$profile" ] || export MLA_TAIL_TEST_PROFILE=$profile

# The staged test binaries this run takes.
test_binaries=()
for name in ${only_binaries//,/ } ${skip_binaries//,/ }; do
  [ -x "$here/tests/$name" ] || { echo "run.sh: no staged test binary $name" >&2; exit 2; }
done
for t in "$here"/tests/*; do
  name=$(basename "$t")
  [ -z "$only_binaries" ] || [[ ",$only_binaries," == *",$name,"* ]] || continue
  [[ ",$skip_binaries," != *",$name,"* ]] || continue
  test_binaries+=("$t")
done
[ ${#test_binaries[@]} -gt 0 ] || { echo "run.sh: no test binary selected" >&2; exit 2; }

mkdir -p "$out"
rm -rf "$out/sanitize"  # an earlier run's verdicts there would be counted as this run's
summary=$out/summary.txt
verdicts=$out/verdicts.txt  # one "STATUS label" line per record, for the closing counts
: >"$summary"
: >"$verdicts"
export MLA_TAIL_REQUIRE_GPU=1
# Tests needing more GPUs than the machine has skip; as many as it has must run.
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
export MLA_TAIL_REQUIRE_GPUS=${MLA_TAIL_REQUIRE_GPUS:-$gpus}
# Tests that fill the device's memory: beside them, any other run on the GPU would fail to
# allocate, so they run alone.
exclusive_tests=('*DeviceFull*' '*DeviceMemoryExhausted*')
# Tests of streams running at once (a stream held by a host function while work on another must
# finish, or a call must return): under every tool the other stream's work did not end while the
# host function held the first, so they would wait out their hold. They run in the plain run only.
concurrency_tests=(SafetyGpuTest.OnlyDifferentGraphsOfASetRunAtOnce
                   SafetyGpuTest.PreparingTheBmmPathWithTheDeviceFullWaitsForNoStreamOfTheCallers)
started=$SECONDS

# Appends stdin to summary.txt (and prints it) in one piece: concurrent runs append whole
# records, never interleaved lines.
append() {
  local text
  text=$(cat)
  [ -n "$text" ] || return 0
  if command -v flock >/dev/null 2>&1; then
    { flock 9; printf '%s\n' "$text" | tee -a "$summary"; } 9>>"$out/.summary.lock"
  else
    printf '%s\n' "$text" | tee -a "$summary"
  fi
}

record() {  # status label seconds [note [details]]: a verdict line (details below it), counted
  printf '%s %s\n' "$1" "$2" >>"$verdicts"
  {
    printf '%-4s %-64s %6ss%s\n' "$1" "$2" "$3" "${4:+  $4}"
    [ -z "${5:-}" ] || printf '%s\n' "$5" | sed 's/^/    /'
  } | append
}

failure_details() {  # log: what a failed run's log says about the failure, briefly
  {
    grep -E '^=========' "$1" | grep -vE '^========= (COMPUTE-SANITIZER|ERROR SUMMARY: 0 )' | head -30
    grep -A2 -E ': Failure$' "$1" | head -20
    grep -E '^\[  FAILED  \] .* ms\)$' "$1" | head -10
  } | awk '!seen[$0]++'
  grep -qE '^=========|: Failure$|^\[  FAILED  \]' "$1" || tail -n 20 "$1"
}

limited() {  # command...: runs it under --timeout when one is set
  if [ "$timeout_s" -gt 0 ] 2>/dev/null; then timeout -k 10 "$timeout_s" "$@"; else "$@"; fi
}

# Reads a gtest run's output and appends each test case's verdict as the case ends (the
# "[ ... ] Name (N ms)" lines; gtest's closing list repeats names without a time).
case_lines() {  # prefix
  local line
  while IFS= read -r line; do
    case $line in
      '[       OK ] '*' ms)') echo "  PASS $1 ${line#*\] }" | append ;;
      '[  FAILED  ] '*' ms)') echo "  FAIL $1 ${line#*\] }" | append ;;
      '[  SKIPPED ] '*' ms)') echo "  SKIP $1 ${line#*\] }" | append ;;
    esac
  done
}

# A plain run: the binary's output goes to its log, and each case's verdict to the summary.
run_binary() {  # label log command...
  local label=$1 log=$2 start=$SECONDS rc premature=$2.premature
  shift 2
  rm -f "$premature"
  # gtest deletes this file as it finishes; one left behind marks an exit in mid-run.
  TEST_PREMATURE_EXIT_FILE=$premature limited "$@" 2>&1 | tee "$log" | case_lines "$label:"
  rc=${PIPESTATUS[0]}
  # A binary whose cases all skipped, or that ran none (a filter matching none of its cases), is
  # no pass: SKIP and NONE are recorded apart from PASS and FAIL.
  if [ "$rc" = 0 ] && grep -q '^\[  PASSED  \] 0 tests' "$log"; then
    if grep -q '^\[  SKIPPED \]' "$log"; then
      record SKIP "$label" $((SECONDS - start)) "every case skipped"
    else
      record NONE "$label" $((SECONDS - start)) "no case ran (the filter matches none here)"
    fi
  elif [ "$rc" = 0 ] && ! grep -q '^\[==========\]' "$log" && grep -q '^SKIP' "$log"; then
    # A program that is no gtest binary (the example runtime, the demo) and said it skipped.
    record SKIP "$label" $((SECONDS - start)) "$(grep -m1 '^SKIP' "$log")"
  elif [ "$rc" = 0 ] && grep -q '^\[==========\]' "$log" &&
       { [ -e "$premature" ] || ! grep -qE '^\[  PASSED  \] [1-9]' "$log" ||
         grep -q '^\[  FAILED  \]' "$log"; }; then
    # gtest that exited 0 before its closing lines (an exit() inside a case): no pass.
    record FAIL "$label" $((SECONDS - start)) "exit 0 before the test program finished" \
      "$(tail -n 5 "$log")"
  elif [ "$rc" = 0 ]; then
    record PASS "$label" $((SECONDS - start))
  else
    local note="exit $rc"
    [ "$rc" != 124 ] && [ "$rc" != 137 ] || note="timed out after ${timeout_s}s"
    record FAIL "$label" $((SECONDS - start)) "$note" "$(failure_details "$log")"
  fi
}

# The test cases of a binary that a gtest filter selects, one "Suite.Case" a line.
list_cases() {  # binary filter
  "$1" --gtest_list_tests --gtest_filter="$2" 2>/dev/null | awk '
    /^[^ ]/ { suite = ($1 ~ /\.$/) ? $1 : ""; next }
    /^  / && suite != "" { print suite $1 }'
}

matches_any() {  # name patterns...: whether name matches one of the glob patterns
  local name=$1 p
  shift
  for p in "$@"; do
    # shellcheck disable=SC2053
    [[ $name == $p ]] && return 0
  done
  return 1
}

with_negative() {  # filter patterns...: the filter minus the patterns
  local f=$1 neg
  shift
  [ $# -gt 0 ] || { echo "$f"; return; }
  neg=$(IFS=:; echo "$*")
  case $f in *-*) echo "$f:$neg" ;; *) echo "$f-$neg" ;; esac
}

{
  cat "$here/MANIFEST" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "profile: ${profile:-full}"
} | append

if [ "$run_tests" = 1 ]; then
  for t in "${test_binaries[@]}"; do
    name=$(basename "$t")
    run_binary "$name" "$out/$name.log" "$t" --gtest_filter="$filter"
  done
fi

# One sanitizer run: a test binary, or one gtest shard or test case of it. Appends its verdict
# (and, for a shard or a whole binary, each test case's) as soon as it ends, and keeps it in
# LOG.verdict for the closing table.
sanitize_one() {  # tool binary label log unit(case|group) gtest-filter-argument
  local tool=$1 t=$2 label=$3 log=$4 unit=$5 start=$SECONDS
  shift 5
  # Binaries that provoke CUDA API errors on purpose (a broken capture, memory exhausted, an
  # exec of another graph): for them only memory errors count, not the API errors the
  # sanitizer would also report.
  local api=()
  case $(basename "$t") in fault_*|kernel_load_*|safety_*) api=(--report-api-errors no) ;; esac
  local stream=(case_lines "$label:")
  [ "$unit" = group ] || stream=(cat)  # one test case: the run's verdict is the case's
  # The tool's own exit code for errors it found (86), apart from the program's (a crash).
  limited "$sanitizer" --tool "$tool" --error-exitcode 86 "${api[@]}" --print-limit 100 "$t" "$@" \
    2>&1 | tee "$log" | "${stream[@]}" >/dev/null
  local rc=${PIPESTATUS[0]}
  # racecheck cannot follow the mbarrier-synchronised pipelines of cuBLASLt's own kernels
  # (nvjet*) and reports shared-memory hazards inside them (excluding those kernels from
  # instrumentation crashed the sanitizer). A hazard in any other kernel fails the run.
  local ours theirs errors="" verdict note
  ours=$(grep -E '^========= (Error|Warning): Race' "$log" | grep -vc nvjet)
  theirs=$(grep -E '^========= (Error|Warning): Race' "$log" | grep -c nvjet)
  [ "$tool" = racecheck ] || errors=$(grep -E '^========= ERROR SUMMARY: [1-9]' "$log" | head -1)
  note="exit $rc, $(grep -cE '^\[       OK \]' "$log") passed"
  if [ "$tool" = racecheck ]; then note="$note, hazards: ours $ours, nvjet $theirs"
  else note="$note, $(grep -oE 'ERROR SUMMARY: [0-9]+ errors?' "$log" | tail -1 | cut -d' ' -f3-)"
  fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    verdict=FAIL note="timed out after ${timeout_s}s"
  elif grep -q '^\[  PASSED  \] 0 tests' "$log" && ! grep -qE '^\[  (FAILED|SKIPPED) ' "$log"; then
    verdict=NONE
  elif grep -q '^\[  PASSED  \] 0 tests' "$log" && ! grep -q '^\[  FAILED  \]' "$log" \
       && [ "$rc" = 0 ]; then
    verdict=SKIP
  elif grep -q '^\[  PASSED  \]' "$log" && ! grep -q '^\[  FAILED  \]' "$log" \
       && [ "$ours" = 0 ] && [ -z "$errors" ] \
       && grep -qE '^========= (ERROR|RACECHECK) SUMMARY' "$log" \
       && ! grep -qE '^========= (Target application returned an error|Error: process didn.t terminate successfully)' "$log" \
       && { [ "$rc" = 0 ] || { [ "$tool" = racecheck ] && [ "$theirs" -gt 0 ] && [ "$rc" = 86 ]; }; }; then
    # Any other exit fails the run (a crash after the cases, the tool not finishing), but for
    # racecheck's error exit where the hazards it reported are in cuBLASLt's kernels alone.
    verdict=PASS
  else
    verdict=FAIL
  fi
  echo "$verdict $((SECONDS - start)) $rc" >"$log.verdict"
  if [ "$verdict" = NONE ]; then
    echo "---- $label: the filter matches no test here" | append
    return
  fi
  local details=""
  [ "$verdict" = PASS ] || details=$(failure_details "$log")
  record "$verdict" "$label" $((SECONDS - start)) "$note" "$details"
}

if [ -n "$sanitize_tools" ]; then
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  "$sanitizer" --version 2>&1 | grep -m1 -i version | sed 's/^/sanitizer: /' | append
  mkdir -p "$out/sanitize"
  # The heaviest runs first, so that the last to start are short: racecheck, then initcheck;
  # the grid and graph suites before the small ones.
  tools=()
  for tool in racecheck initcheck memcheck synccheck ${sanitize_tools//,/ }; do
    case ",$sanitize_tools," in *",$tool,"*) ;; *) continue ;; esac
    matches_any "$tool" "${tools[@]}" || tools+=("$tool")
  done
  binaries=()
  for name in mla_gpu_test graph_gpu_test reliability_gpu_test; do
    matches_any "$here/tests/$name" "${test_binaries[@]}" && binaries+=("$here/tests/$name")
  done
  for t in "${test_binaries[@]}"; do
    matches_any "$t" "${binaries[@]}" || binaries+=("$t")
  done

  # Each binary's test cases under the filter, listed once.
  declare -A listed
  for t in "${binaries[@]}"; do
    name=$(basename "$t")
    if ! listed[$name]=$(list_cases "$t" "$sanitize_filter"); then
      record FAIL "sanitize:$name" 0 "its tests cannot be listed: $("$t" --gtest_list_tests 2>&1 | tail -1)"
      unset "listed[$name]"
    fi
  done

  # The runs, as "tool<TAB>binary<TAB>label<TAB>log<TAB>unit<TAB>gtest filter<TAB>shard" lines;
  # those that fill the device apart.
  jobs_file=$out/sanitize/jobs.txt
  alone_file=$out/sanitize/alone.txt
  : >"$jobs_file"
  : >"$alone_file"
  job() {  # file tool binary label log unit filter [shard]
    local file=$1
    shift
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${7:-}" >>"$file"
  }
  for tool in "${tools[@]}"; do
    for t in "${binaries[@]}"; do
      name=$(basename "$t")
      [ -n "${listed[$name]+set}" ] || continue
      skip=("${concurrency_tests[@]}")
      cases=()
      alone=()
      while IFS= read -r c; do
        if [ -z "$c" ] || matches_any "$c" "${skip[@]}"; then continue
        elif matches_any "$c" "${exclusive_tests[@]}"; then alone+=("$c")
        else cases+=("$c")
        fi
      done <<<"${listed[$name]}"
      if [ ${#cases[@]} = 0 ] && [ ${#alone[@]} = 0 ]; then
        echo "---- $tool:$name: the filter matches no test here" | append
        continue
      fi
      logs=$out/sanitize/$tool.$name
      if [ "$sanitize_shards" = case ]; then
        for c in "${cases[@]}"; do
          job "$jobs_file" "$tool" "$t" "$tool:$name:$c" "$logs.${c//\//_}.log" case "$c"
        done
        for c in "${alone[@]}"; do
          job "$alone_file" "$tool" "$t" "$tool:$name:$c" "$logs.${c//\//_}.log" case "$c"
        done
      else
        f=$(with_negative "$sanitize_filter" "${skip[@]}" "${exclusive_tests[@]}")
        if [ ${#cases[@]} -gt 0 ]; then
          for ((shard = 0; shard < sanitize_shards; ++shard)); do
            label="$tool:$name"
            [ "$sanitize_shards" = 1 ] || label="$label[$shard/$sanitize_shards]"
            job "$jobs_file" "$tool" "$t" "$label" "$logs.$shard.log" group "$f" "$shard"
          done
        fi
        if [ ${#alone[@]} -gt 0 ]; then
          job "$alone_file" "$tool" "$t" "$tool:$name[alone]" "$logs.alone.log" group \
            "$(IFS=:; echo "${alone[*]}")"
        fi
      fi
    done
  done
  echo "sanitizer runs: $(wc -l <"$jobs_file"), at most $sanitize_jobs at once; then" \
       "$(wc -l <"$alone_file") alone (they fill the device)" | append

  run_job() {  # a line of the jobs file
    local tool t label log unit f shard
    IFS=$'\t' read -r tool t label log unit f shard <<<"$1"
    if [ -n "$shard" ]; then
      GTEST_SHARD_INDEX=$shard GTEST_TOTAL_SHARDS=$sanitize_shards \
        sanitize_one "$tool" "$t" "$label" "$log" "$unit" --gtest_filter="$f"
    else
      sanitize_one "$tool" "$t" "$label" "$log" "$unit" --gtest_filter="$f"
    fi
  }
  running=0
  while IFS= read -r line; do
    run_job "$line" </dev/null &
    running=$((running + 1))
    if [ "$running" -ge "$sanitize_jobs" ]; then wait -n; running=$((running - 1)); fi
  done <"$jobs_file"
  wait
  while IFS= read -r line; do run_job "$line" </dev/null; done <"$alone_file"

  # The closing table: passed / runs for each binary and tool, failures marked.
  {
    echo
    printf '%-24s' "sanitizer runs passed"
    for tool in ${sanitize_tools//,/ }; do printf ' %11s' "$tool"; done
    echo
    for t in "${test_binaries[@]}"; do
      name=$(basename "$t")
      printf '%-24s' "$name"
      for tool in ${sanitize_tools//,/ }; do
        runs=0 ok=0 bad=0
        for v in "$out/sanitize/$tool.$name."*.verdict; do
          [ -e "$v" ] || continue
          read -r verdict _ <"$v"
          case $verdict in
            PASS) runs=$((runs + 1)); ok=$((ok + 1)) ;;
            FAIL) runs=$((runs + 1)); bad=$((bad + 1)) ;;
          esac
        done
        cell="$ok/$runs"
        [ "$runs" != 0 ] || cell="-"
        [ "$bad" = 0 ] || cell="$cell FAIL"
        printf ' %11s' "$cell"
      done
      echo
    done
    missing=$(($(cat "$jobs_file" "$alone_file" | wc -l) - $(ls "$out/sanitize/"*.verdict 2>/dev/null | wc -l)))
    [ "$missing" = 0 ] || echo "$missing sanitizer runs left no verdict"
  } | append
fi

for spec in "${bins[@]}"; do
  name=${spec%% *}
  args=""
  [ "$name" = "$spec" ] || args=${spec#* }
  args=${args//\{out\}/$out}
  if [ ! -x "$here/bin/$name" ]; then record FAIL "$name" 0 "not staged: bin/$name"; continue; fi
  # shellcheck disable=SC2086
  run_binary "$name" "$out/$name.log" "$here/bin/$name" $args
  tail -n 60 "$out/$name.log"
done

passed=$(grep -c '^PASS ' "$verdicts")
failed=$(grep -c '^FAIL ' "$verdicts")
skipped=$(grep -c '^SKIP ' "$verdicts")
echo "gpu suite: $passed passed, $failed failed, $skipped skipped ($((SECONDS - started)) s)" | append
# A run in which nothing passed (every binary skipped, or a filter that matches nothing) proves
# nothing: it fails too.
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]

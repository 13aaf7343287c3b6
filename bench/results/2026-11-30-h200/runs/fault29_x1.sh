#!/usr/bin/env bash
# Eighth session, eighth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/fault29_x1.sh   (results under $OUT/fault29)
# After fault_gpu_test's lazy capture on the full device may succeed: the whole plain suite, then
# fault_gpu_test five more times with its XML (whether the lazy capture succeeded).
S=.gpu_stage
O=${OUT:?}/fault29
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
for i in 1 2 3 4 5; do
  timeout 60 $S/tests/fault_gpu_test --gtest_output=xml:"$O/fault_$i.xml" >>"$O/fault.log" 2>&1
  echo "fault run $i: rc $?" >>"$O/fault.log"
done
cd "$OUT" && tar czf results.tgz fault29/suite.out fault29/fault.log fault29/fault_*.xml && rm -rf fault29

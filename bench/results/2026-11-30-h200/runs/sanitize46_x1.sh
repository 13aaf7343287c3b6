#!/usr/bin/env bash
# Tenth session, seventh call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/sanitize46_x1.sh   (results in $OUT/results.tgz)
# MlaValue's 8-row blocks (latent in registers): the plain suite, then memcheck, synccheck,
# initcheck and racecheck over the tests that run them (inactive rows at 8, strided views at 3,
# random data at 1, run-time lengths; the late writer at 12 x 8 and 64 x 5; the graph set's
# buckets of 1-64 rows and its padding).
S=.gpu_stage
O=${OUT:?}/sanitize46
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
F='MlaGpuTest.InactiveRowsAreZeroDespiteNan:MlaGpuTest.StridedViews:MlaGpuTest.RandomDataWithinOneUlp'
F=$F':MlaGpuTest.LengthsAreReadAtRunTime:ReliabilityGpuTest.InputsWrittenUpstreamUntilItsEndAreSeen'
F=$F':Paths/GraphGpuTest.ReplayEqualsEagerForEveryBucket/*:Paths/GraphGpuTest.LengthsAndPadding/*'
timeout 380 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter="$F" >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
cd "$OUT" && tar czf results.tgz sanitize46/rc.txt sanitize46/gpu.txt sanitize46/suite.out \
  sanitize46/sanitize.out sanitize46/sanitizer_summary.txt && rm -rf sanitize46

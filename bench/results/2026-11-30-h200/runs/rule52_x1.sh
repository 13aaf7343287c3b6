#!/usr/bin/env bash
# Eleventh session, second call (one H200), from the repo root after tools/stage_gpu.sh with
# bb957c7's tail_bench copied to .gpu_stage/extra/tail_bench_old:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/rule52_x1.sh   (results in $OUT/results.tgz)
# Two changes against bb957c7's binary, alternated twice (new, old, new, old):
# - MlaValue's 8-row blocks with four accumulator chains (chunk parity x MMA) instead of two:
#   fused-split at 8-128 heads x 1-16 rows back to back, and after the stand-in upstream (5 us
#   window, with and without its shared memory);
# - the rule told what the tail follows (TailUpstream): the new binary's grid tells it "other"
#   (tails back to back), so auto there should match the fastest forced kernel at 16-128 heads x
#   1-16 rows; p6 and a8n32 forced beside it.
# Then the new binary alone: the same shapes without PDL (the rule takes "other" there); the
# plain suite; memcheck, synccheck, initcheck and racecheck over the tests that run the 8-row
# blocks and the graph test of the rule's "other" choice.
S=.gpu_stage
O=${OUT:?}/rule52
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz rule52); }  # after each step: a cut-off run keeps it
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
for run in new old new old; do
  B=$S/bin/tail_bench
  [ $run = old ] && B=$S/extra/tail_bench_old
  echo "# run $run" >>"$O/tail_bench_ab.csv"
  timeout 60 $B --commit="$C-$run" --csv="$O/tail_bench_ab.csv" --heads=8,12,16,32,64,96,128 \
    --rows=1,2,4,8,12,16 --modes=fused-split,auto,fused-wgmma-p6,fused-wgmma-a8n32 \
    >>"$O/tail_bench_ab.log" 2>&1
  echo "ab $run rc $?" >>"$O/rc.txt"
  for smem in 102400 0; do
    echo "# run $run upstream smem $smem" >>"$O/tail_bench_ab_upstream.csv"
    timeout 30 $B --commit="$C-$run" --upstream --heads=8,12,64,96 --rows=1,8,16 \
      --modes=up,up+pdl --upstream_epilogue_ns=5000 --upstream_smem_bytes=$smem \
      --fused_kernel=split --csv="$O/tail_bench_ab_upstream.csv" >>"$O/tail_bench_ab.log" 2>&1
    echo "ab upstream $run $smem rc $?" >>"$O/rc.txt"
  done
  pack
done
timeout 40 $S/bin/tail_bench --commit="$C" --pdl=false --csv="$O/tail_bench_nopdl.csv" \
  --heads=16,32,64,96,128 --rows=1,4,8,16 \
  --modes=fused-split,auto,fused-wgmma-p6,fused-wgmma-a8n32 >"$O/tail_bench_nopdl.log" 2>&1
echo "nopdl rc $?" >>"$O/rc.txt"
pack
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
rc=$?
echo "suite rc $rc" >>"$O/rc.txt"
cp "$O/suite/summary.txt" "$O/gpu_suite_summary.txt" 2>/dev/null
[ $rc -eq 0 ] && rm -rf "$O/suite"
pack
F='MlaGpuTest.InactiveRowsAreZeroDespiteNan:MlaGpuTest.StridedViews:MlaGpuTest.RandomDataWithinOneUlp'
F=$F':MlaGpuTest.LengthsAreReadAtRunTime:ReliabilityGpuTest.InputsWrittenUpstreamUntilItsEndAreSeen'
F=$F':Paths/GraphGpuTest.ReplayEqualsEagerForEveryBucket/*:Paths/GraphGpuTest.LengthsAndPadding/*'
F=$F':GraphTileKernelTest.ReplayEqualsEagerAndFollowsUpdates'
timeout 240 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter="$F" >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
rm -rf "$O/sanitize"
pack && rm -rf "$O"

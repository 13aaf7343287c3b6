#!/usr/bin/env bash
# Twelfth session, eighth call (one H200), from the repo root after tools/stage_gpu.sh and
# 9d42715's tail_bench (the 16-row blocks and the 64 x 32 tiles at 17-32 rows) copied to
# .gpu_stage/extra/tail_bench_old:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/rows63_x1.sh   (results in $OUT/results.tgz)
# MlaValue's 8-row blocks at 17-32 rows (up to 8 heads at 32) against the previous binary,
# alternated twice, back to back and after the stand-in upstream; the plain suite; the four
# sanitizers over the grid test at 8 heads (rows 1-256, the 8-row blocks at 17 and 32); every
# benchmark the README quotes, the table and the main job.
S=.gpu_stage
O=${OUT:?}/rows63
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz rows63); }
C=$(sed -n 's/^commit //p' $S/MANIFEST)
for i in 1 2; do
  for b in old new; do
    bin=$S/bin/tail_bench; [ $b = old ] && bin=$S/extra/tail_bench_old
    timeout 40 $bin --commit="$C-$b" --heads=1,3,4,8 --rows=16,17,24,32 \
      --modes=fused-split,fused-wgmma-a8n32,auto --csv="$O/tail_bench_ab$i.$b.csv" \
      >"$O/ab$i.$b.log" 2>&1
    echo "ab $i $b rc $?" >>"$O/rc.txt"
    timeout 20 $bin --commit="$C-$b" --upstream --heads=8 --rows=24,32 \
      --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 \
      --csv="$O/tail_bench_upstream_ab$i.$b.csv" >"$O/up$i.$b.log" 2>&1
    echo "up $i $b rc $?" >>"$O/rc.txt"
    pack
  done
done
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
rc=$?
echo "suite rc $rc" >>"$O/rc.txt"
cp "$O/suite/summary.txt" "$O/gpu_suite_summary.txt" 2>/dev/null
[ $rc -eq 0 ] && rm -rf "$O/suite"
pack
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-jobs=4 \
  --sanitize-filter='Heads/GridTest.BothPathsBitExact/H8' >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
rm -rf "$O/sanitize"
pack
timeout 200 $S/benchmarks.sh --out="$O" --after='(cd "$OUT" && tar czf results.tgz rows63)'
echo "benchmarks.sh rc $?" >>"$O/rc.txt"
pack && rm -rf "$O"

#!/usr/bin/env bash
# Twelfth session, seventh call (one H200), from the repo root after tools/stage_gpu.sh at 9d42715
# and 66e98f1's tail_bench (one warpgroup in the 64 x 128 tiles) copied to
# .gpu_stage/extra/tail_bench_old:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/ab62_x1.sh   (results in $OUT/results.tgz)
# The four sanitizers over the tests that force every tile kernel at 12 heads (final61's filter
# also took 64 heads and ran past its limit); then the 64 x 128 tiles with two warpgroups against
# one in tail_bench, alternated twice, at 8-128 heads x 64-1024 rows.
S=.gpu_stage
O=${OUT:?}/ab62
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz ab62); }
C=$(sed -n 's/^commit //p' $S/MANIFEST)
run_ab() {
  for i in 1 2; do
    for b in old new; do
      bin=$S/bin/tail_bench; [ $b = old ] && bin=$S/extra/tail_bench_old
      timeout 60 $bin --commit="$C-$b" --heads=8,16,32,64,128 --rows=64,128,256,512,1024 \
        --modes=fused-wgmma-n128 --csv="$O/tail_bench_ab$i.$b.csv" >"$O/ab$i.$b.log" 2>&1
      echo "ab $i $b rc $?" >>"$O/rc.txt"
      pack
    done
  done
}
run_ab
F='Heads/TileKernelTest.BitExactAndEqualToColumnSplit/H12'
F=$F':MlaGpuTest.TileKernelStridedInactiveAndRandom:GraphTileKernelTest.*'
timeout 330 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter="$F" >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
rm -rf "$O/sanitize"
pack && rm -rf "$O"

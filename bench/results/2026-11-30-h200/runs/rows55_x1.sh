#!/usr/bin/env bash
# Eleventh session, fifth call (one H200), from the repo root after tools/stage_gpu.sh with
# 1e0f13e's tail_bench copied to .gpu_stage/extra/tail_bench_old:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/rows55_x1.sh   (results in $OUT/results.tgz)
# rows50 again with the four-chain 8-row blocks: a binary whose rule runs them at 9-16 rows up to
# 49 heads (two a column block, at most 396 blocks) against 1e0f13e's (up to 12 heads),
# alternated twice, back to back and after the stand-in upstream (5 us window, with and without
# its shared memory), to set the rule's 9-16-row threshold.
S=.gpu_stage
O=${OUT:?}/rows55
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz rows55); }  # after each step: a cut-off run keeps it
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
for run in new old new old; do
  B=$S/bin/tail_bench
  [ $run = old ] && B=$S/extra/tail_bench_old
  echo "# run $run" >>"$O/tail_bench_ab.csv"
  timeout 40 $B --commit="$C-$run" --csv="$O/tail_bench_ab.csv" --heads=12,16,24,32,48 \
    --rows=9,12,16 --modes=fused-split,auto >>"$O/tail_bench_ab.log" 2>&1
  echo "ab $run rc $?" >>"$O/rc.txt"
  for smem in 102400 0; do
    echo "# run $run upstream smem $smem" >>"$O/tail_bench_ab_upstream.csv"
    timeout 30 $B --commit="$C-$run" --upstream --heads=16,24,32,48 --rows=12,16 \
      --modes=up,up+pdl --upstream_epilogue_ns=5000 --upstream_smem_bytes=$smem \
      --fused_kernel=split --csv="$O/tail_bench_ab_upstream.csv" >>"$O/tail_bench_ab.log" 2>&1
    echo "ab upstream $run $smem rc $?" >>"$O/rc.txt"
  done
  pack
done
rm -rf "$O"

#!/usr/bin/env bash
# Seventh session, ninth call (one H200), from the repo root after tools/stage_gpu.sh and a copy
# of d5e7849's tail_bench as .gpu_stage/bin/tail_bench_d5e7849 (its MLA_WS_EVEN switch):
#   timeout 200 bash bench/results/2026-11-30-h200/runs/even20_x1.sh   (results under $OUT/even20)
# The balanced grid of MlaValueWgmma-ws at 2048 and 4096 rows, where final18 measured 128 x 4096
# 5% slower than final17 on another H200 (the peers 2% slower): old and balanced grid alternated.
S=.gpu_stage
O=${OUT:?}/even20
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
for i in 1 2; do
  for even in 0 1; do
    echo "# run $i, even $even" >>"$O/tail_bench.csv"
    if [ $even = 1 ]; then export MLA_WS_EVEN=1; else unset MLA_WS_EVEN; fi
    timeout 40 $S/bin/tail_bench_d5e7849 --commit=d5e7849 --csv="$O/tail_bench.csv" \
      --heads=64,128 --rows=2048,4096 --modes=fused-wgmma-ws >>"$O/tail_bench.log" 2>&1
    echo "$i $even rc $?" >>"$O/rc.txt"
  done
done
cd "$OUT" && tar czf results.tgz even20

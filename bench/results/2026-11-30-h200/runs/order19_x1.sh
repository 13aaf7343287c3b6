#!/usr/bin/env bash
# Seventh session, eighth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 200 bash bench/results/2026-11-30-h200/runs/order19_x1.sh   (results under $OUT/order19)
# In final18 the dispatched path measured 3-5% slower than the same kernel forced at 96-128 x
# 1024 rows (the grid runs the forced kernels, then bmm, then auto). The same modes in three
# orders, twice: does the mode measured after the BMM path (cuBLASLt at full power) lose?
S=.gpu_stage
O=${OUT:?}/order19
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
for i in 1 2; do
  for order in fused-wgmma-ws,bmm,auto bmm,fused-wgmma-ws,auto auto,fused-wgmma-ws,bmm; do
    echo "# run $i, order $order" >>"$O/tail_bench.csv"
    timeout 40 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
      --heads=96,128 --rows=512,1024 --modes=$order >>"$O/tail_bench.log" 2>&1
    echo "$i $order rc $?" >>"$O/rc.txt"
  done
done
cd "$OUT" && tar czf results.tgz order19

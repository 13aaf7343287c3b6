#!/usr/bin/env bash
# Eighth session, third call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 400 bash bench/results/2026-11-30-h200/runs/cfg24_x1.sh   (results under $OUT/cfg24)
# wgmma-a8n32 (64 x 32 tiles, all 8 steps in flight, 101 KB: two blocks a multiprocessor) beside
# MlaValue, a8, p6 and p4 at 8-128 heads x 1-256 rows, twice, after the plain suite; then after
# the stand-in upstream (100 KB a block, 5 us window): MlaValue, p6 and a8n32 at 64-128 heads x
# 1-16 rows.
S=.gpu_stage
O=${OUT:?}/cfg24
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
M=fused-split,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-a8n32,fused-wgmma-p4
for i in 1 2; do
  echo "# run $i" >>"$O/tail_bench.csv"
  timeout 120 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
    --heads=8,12,16,32,64,96,128 --rows=1,4,16,32,64,128,256 --modes=$M >>"$O/tail_bench.log" 2>&1
  echo "$i grid rc $?" >>"$O/rc.txt"
done
for k in split wgmma-p6 wgmma-a8n32; do
  echo "# epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent, fused kernel $k" \
    >>"$O/tail_bench_upstream.csv"
  timeout 40 $S/bin/tail_bench --commit="$C" --upstream --heads=64,96,128 --rows=1,8,16 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 --fused_kernel=$k \
    --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
  echo "upstream $k rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz cfg24

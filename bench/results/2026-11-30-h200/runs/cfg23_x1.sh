#!/usr/bin/env bash
# Eighth session, second call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 400 bash bench/results/2026-11-30-h200/runs/cfg23_x1.sh   (results under $OUT/cfg23)
# The 6-stage 64 x 64 pipeline (wgmma-p6, two blocks a multiprocessor) where cfg22 did not
# measure it: 32-128 heads x 1-32 rows against MlaValue, a8 and p4, twice; and after the
# stand-in upstream kernel (100 KB of shared memory a block, a 5 us window), against MlaValue
# and the all-in-flight a8, at 12-64 heads x 1-64 rows.
S=.gpu_stage
O=${OUT:?}/cfg23
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
M=fused-split,fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-p6,auto
for i in 1 2; do
  echo "# run $i" >>"$O/tail_bench.csv"
  timeout 80 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
    --heads=32,64,96,128 --rows=1,2,4,8,16,32 --modes=$M >>"$O/tail_bench.log" 2>&1
  echo "$i grid rc $?" >>"$O/rc.txt"
done
for k in split wgmma-a8 wgmma-p6; do
  echo "# epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent, fused kernel $k" \
    >>"$O/tail_bench_upstream.csv"
  timeout 40 $S/bin/tail_bench --commit="$C" --upstream --heads=12,16,32,64 --rows=1,16,32,64 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 --fused_kernel=$k \
    --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
  echo "upstream $k rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz cfg23

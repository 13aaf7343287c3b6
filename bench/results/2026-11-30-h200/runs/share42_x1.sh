#!/usr/bin/env bash
# Tenth session, third call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/share42_x1.sh   (results in $OUT/results.tgz)
# The pusher-warp version of the all-in-flight tiles in clusters that share their operand reads (a8x2, a8x2z2, a8n32x4,
# a8n32x4z2): the plain suite (which forces every kernel), then each forced against a8, a8n32,
# p6 and the dispatched path at 8-64 heads x 16-512 rows, twice in one run.
S=.gpu_stage
O=${OUT:?}/share42
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
K=fused-wgmma-a8,fused-wgmma-a8x2,fused-wgmma-a8x2z2,fused-wgmma-a8n32,fused-wgmma-a8n32x4
K=$K,fused-wgmma-a8n32x4z2,fused-wgmma-p6,auto
for run in 1 2; do
  echo "# run $run" >>"$O/tail_bench.csv"
  timeout 150 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
    --heads=8,12,16,32,64 --rows=16,32,64,128,256,512 --modes=$K >>"$O/tail_bench.log" 2>&1
  echo "bench $run rc $?" >>"$O/rc.txt"
done
tar czf "$OUT/results.tgz" -C "$OUT" share42 && rm -rf "$O"

#!/usr/bin/env bash
# Eighth session, ninth call (one H200, a fresh machine), from the repo root after
# tools/stage_gpu.sh (ecdee44, the kernels of 387633d):
#   timeout 300 bash bench/results/2026-11-30-h200/runs/grid30_x1.sh   (results under $OUT/grid30)
# The grid again, every fused kernel forced and the dispatched path, on another H200 than
# final25: how far the rule's margins move from machine to machine.
S=.gpu_stage
O=${OUT:?}/grid30
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,serial --format=csv >"$O/gpu.txt" 2>&1
KERNELS=fused-split,fused-wgmma-a8n32,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-ws
timeout 200 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" --modes=$KERNELS,auto \
  >"$O/tail_bench.log" 2>&1
echo "grid rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz grid30 && rm -rf grid30

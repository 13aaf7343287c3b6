#!/usr/bin/env bash
# Eighth session, tenth call (one H200), from the repo root after tools/stage_gpu.sh (ecdee44):
#   timeout 400 bash bench/results/2026-11-30-h200/runs/ncu31_x1.sh   (results under $OUT/ncu31)
# Nsight Compute (full set) of the kernels farthest from goal 1 at 8-16 heads with many rows,
# each alone (ncu serializes kernels and flushes the caches): the 6-stage pipeline at 12 x 512,
# the 64 x 32 all-in-flight tiles at 12 x 64, the 64 x 128 tiles at 8 x 1024.
S=.gpu_stage
O=${OUT:?}/ncu31
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for run in "12 512 wgmma-p6" "12 64 wgmma-a8n32" "8 1024 wgmma-n128"; do
  set -- $run
  timeout 110 "$NCU" -k regex:MlaValueWgmmaKernel -s 4 -c 1 --set full \
    $S/bin/tail_bench --heads=$1 --rows=$2 --modes=fused-$3 --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.$3.h$1.r$2.txt" 2>&1
  echo "$run rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz ncu31 && rm -rf ncu31

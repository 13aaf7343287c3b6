#!/usr/bin/env bash
# Eighth session, first call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 400 bash bench/results/2026-11-30-h200/runs/cfg22_x1.sh   (results under $OUT/cfg22)
# Two MlaValueWgmma configurations to measure: wgmma-a8n128 (64 x 128, all 8 steps in flight,
# 209 KB) and wgmma-p6 (64 x 64, 6 stages, 105 KB: two blocks a multiprocessor), against p4, a8
# and n128 at 8-128 heads x 32-512 rows and 8-32 x 1024, twice; the plain suite first.
S=.gpu_stage
O=${OUT:?}/cfg22
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
M=fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-n128,fused-wgmma-a8n128,fused-wgmma-p6
for i in 1 2; do
  echo "# run $i" >>"$O/tail_bench.csv"
  timeout 100 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
    --heads=8,12,16,32,64,96,128 --rows=32,64,128,256,512 --modes=$M >>"$O/tail_bench.log" 2>&1
  echo "$i grid rc $?" >>"$O/rc.txt"
  timeout 40 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
    --heads=8,12,16,32 --rows=1024 --modes=$M >>"$O/tail_bench.log" 2>&1
  echo "$i 1024 rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz cfg22

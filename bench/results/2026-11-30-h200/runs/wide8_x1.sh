#!/usr/bin/env bash
# Sixth session, third call: the persistent MlaValueWgmma with 4, 5 and 6 stages (one epilogue
# buffer, swizzled gate tile) against the other configurations, the BMM path and the peer at
# rows 16-1024 (the gate tile layout changed in every configuration); the fused kernels' tests;
# Nsight Compute of the 6-stage one at 64 x 1024 and 128 x 1024 rows.
# One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/wide8_x1.sh   (results under $OUT/wide8)
S=.gpu_stage
O=${OUT:?}/wide8
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 150 $S/run.sh --out="$O/suite" \
  --filter='Heads/TileKernelTest.*:GraphTileKernelTest.*:MlaGpuTest.*' \
  >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 260 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --rows=16,32,64,128,256,512,1024 \
  --modes=fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-k2,fused-wgmma-n128-p3,fused-wgmma-m128-p2,fused-wgmma-m128-p4,fused-wgmma-m128-ps4,fused-wgmma-m128-ps5,fused-wgmma-m128-ps,bmm,peer \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for shape in "64 1024" "128 1024"; do
  set -- $shape
  timeout 40 "$NCU" -k regex:MlaValueWgmma -s 4 -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section SchedulerStats \
    $S/bin/tail_bench --heads=$1 --rows=$2 --modes=fused-wgmma-m128-ps --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.wgmma-m128-ps.h$1.r$2.txt" 2>&1
done
echo "ncu done" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz wide8

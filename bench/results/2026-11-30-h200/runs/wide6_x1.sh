#!/usr/bin/env bash
# Sixth session, first call: MlaValueWgmma with 128-column blocks (m64n128: each latent row read
# once, not once per 64-column half) and 128-row blocks (two warpgroups sharing each W_UV slice)
# against the 64 x 64 tile, the tile kernel, the BMM path and the peer over the grid's rows
# 32-1024; their tests; Nsight Compute's throughput and memory sections at 64 x 1024 rows.
# One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/wide6_x1.sh   (results under $OUT/wide6)
S=.gpu_stage
O=${OUT:?}/wide6
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >"$O/smi.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" \
  --filter='Heads/TileKernelTest.*:GraphTileKernelTest.*:MlaGpuTest.*' \
  >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 230 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --rows=32,64,128,256,512,1024 \
  --modes=fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-n128-p3,fused-wgmma-n128-a8,fused-wgmma-m128-p2,fused-wgmma-m128-p4,fused-tile128,bmm,peer \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for m in wgmma-p4 wgmma-n128-p3 wgmma-m128-p4 wgmma-m128-p2; do
  timeout 40 "$NCU" -k regex:MlaValueWgmma -s 4 -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    $S/bin/tail_bench --heads=64 --rows=1024 --modes=fused-$m --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.$m.h64.r1024.txt" 2>&1
done
echo "ncu done" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz wide6

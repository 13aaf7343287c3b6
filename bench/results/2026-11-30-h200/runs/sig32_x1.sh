#!/usr/bin/env bash
# Ninth session, first call (one H200), from the repo root after tools/stage_gpu.sh (448de1d) with
# 6ea4cfb's tail_bench copied to .gpu_stage/extra/:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/sig32_x1.sh   (results under $OUT/sig32)
# The gate's sigmoids computed during the K steps (448de1d) against after the last MMA (6ea4cfb):
# the plain suite, then every MlaValueWgmma configuration and the warp-specialized kernel forced,
# and the dispatched path, at 8-128 heads x 16-1024 rows, the two binaries alternated twice.
S=.gpu_stage
O=${OUT:?}/sig32
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
M=fused-wgmma-a8n32,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-ws,auto
for i in 1 2; do
  for b in new old; do
    if [ $b = new ]; then B=$S/bin/tail_bench; BC=$C; else B=$S/extra/tail_bench_6ea4cfb; BC=6ea4cfb; fi
    echo "# run $i $b" >>"$O/tail_bench.csv"
    timeout 150 $B --commit="$BC" --csv="$O/tail_bench.csv" \
      --heads=8,12,16,32,64,96,128 --rows=16,32,64,128,256,512,1024 --modes=$M \
      >>"$O/tail_bench.log" 2>&1
    echo "$i $b grid rc $?" >>"$O/rc.txt"
  done
done
cd "$OUT" && tar czf results.tgz sig32 && rm -rf sig32

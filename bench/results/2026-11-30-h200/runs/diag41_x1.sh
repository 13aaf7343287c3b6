#!/usr/bin/env bash
# Tenth session, second call (one H200), after tools/stage_gpu.sh (df8fdad's kernels):
#   timeout 400 bash bench/results/2026-11-30-h200/runs/diag41_x1.sh   (results in $OUT/results.tgz)
# Why the sharing clusters (share40) cost about 1.7 us even at 16 blocks: each kernel alone
# under Nsight Compute (speed of light, launch statistics) against its unshared twin, and the
# grid's chain without PDL.
S=.gpu_stage
O=${OUT:?}/diag41
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for run in "8 16 wgmma-a8" "8 16 wgmma-a8x2" "12 128 wgmma-a8" "12 128 wgmma-a8x2" \
           "12 128 wgmma-a8n32" "12 128 wgmma-a8n32x4"; do
  set -- $run
  timeout 60 "$NCU" -k regex:MlaValueWgmmaKernel -s 4 -c 1 --section SpeedOfLight \
    --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats \
    $S/bin/tail_bench --heads=$1 --rows=$2 --modes=fused-$3 --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.$3.h$1.r$2.txt" 2>&1
  echo "$run rc $?" >>"$O/rc.txt"
done
for pdl in false true; do
  echo "# pdl $pdl" >>"$O/tail_bench.csv"
  timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" --pdl=$pdl \
    --heads=8,16 --rows=16,256 \
    --modes=fused-wgmma-a8,fused-wgmma-a8x2,fused-wgmma-a8n32,fused-wgmma-a8n32x4 \
    >>"$O/tail_bench.log" 2>&1
  echo "pdl $pdl rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz diag41 && rm -rf diag41

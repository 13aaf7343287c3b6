#!/usr/bin/env bash
# Fourth session, third call (one H200), from the repo root after tools/stage_gpu.sh and a copy of
# tail_bench built without the L2 prefetch as $S/bin/tail_bench_noprefetch:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/probe3_x1.sh   (results under $OUT/probe3)
# Every fused kernel forced over the grid (the data for the dispatch rule after the MlaValue
# fix); the L2 prefetch against its absence (grid subset, and after an upstream kernel); the
# suite.
S=.gpu_stage
O=${OUT:?}/probe3
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
KERNELS=fused-split,fused-tile64,fused-tile128,fused-wgmma-p4,fused-wgmma-k2,fused-wgmma-k4
timeout 200 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_kernels.csv" \
  --modes=$KERNELS,bmm,auto >"$O/tail_bench_kernels.log" 2>&1
for b in tail_bench tail_bench_noprefetch; do
  timeout 60 $S/bin/$b --commit="$C" --heads=8,12,32,64,128 --rows=1,8,16,64,256 \
    --modes=fused-split,fused-wgmma-k2,fused-tile64 --csv="$O/prefetch_ab.$b.csv" \
    >"$O/prefetch_ab.$b.log" 2>&1
  for w in true false; do
    for e in 0 1000; do
      echo "# $b writes_latent $w epilogue $e" >>"$O/upstream.csv"
      timeout 40 $S/bin/$b --commit="$C" --upstream --heads=12,64 --rows=1,16 \
        --modes=up,up+pdl,up+nopdl --upstream_writes_latent=$w --upstream_epilogue_ns=$e \
        --csv="$O/upstream.csv" >>"$O/upstream.log" 2>&1
    done
  done
done
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
cd "$OUT" && tar czf results.tgz probe3

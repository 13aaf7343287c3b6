#!/usr/bin/env bash
# Seventh session, tenth call (one H200), from the repo root after tools/stage_gpu.sh and a copy
# of ffd2599's tail_bench as .gpu_stage/bin/tail_bench_ffd2599:
#   timeout 200 bash bench/results/2026-11-30-h200/runs/tile21_x1.sh   (results under $OUT/tile21)
# After the wgmma kernels' tiles moved into wg_tile.cuh (same math, the copies and epilogue in
# one place): the whole plain suite; memcheck, synccheck and initcheck over the fused kernels'
# tests at 64 heads and their graph test; every MlaValueWgmma kernel against ffd2599's binary,
# alternated twice, at 12 and 128 heads x 64, 256 and 1024 rows.
S=.gpu_stage
O=${OUT:?}/tile21
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 75 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
M=fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-n128,fused-wgmma-ws
for i in 1 2; do
  for b in tail_bench_ffd2599 tail_bench; do
    echo "# run $i, binary $b" >>"$O/tail_bench.csv"
    timeout 25 $S/bin/$b --commit="$C" --csv="$O/tail_bench.csv" --heads=12,128 \
      --rows=64,256,1024 --modes=$M >>"$O/tail_bench.log" 2>&1
    echo "$i $b rc $?" >>"$O/rc.txt"
  done
done
timeout 60 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck --sanitize-shards=2 --sanitize-jobs=6 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz tile21

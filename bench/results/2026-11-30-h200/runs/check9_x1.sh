#!/usr/bin/env bash
# Sixth session, fourth call: the redrawn rule's kernels through the whole plain suite and the
# four sanitizers (the fused kernels' tests at 64 heads, where the persistent kernel loops over
# several tiles a block, and their graph test); the persistent kernels (128 x 128 and the
# 64 x 128 experiment) against the 64 x 128 and 64 x 64 pipelines at 128-1024 rows, and against
# the BMM path and the peer at 2048 and 4096 rows.
# One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/check9_x1.sh   (results under $OUT/check9)
S=.gpu_stage
O=${OUT:?}/check9
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=16,32,64,96,128 --rows=128,256,512,1024 \
  --modes=fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-persistent,fused-wgmma-persistent64 \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 \
  --modes=fused-wgmma-persistent,fused-wgmma-persistent64,bmm,peer \
  >"$O/tail_bench_large.log" 2>&1
echo "tail_bench_large rc $?" >>"$O/rc.txt"
timeout 270 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=12 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz check9

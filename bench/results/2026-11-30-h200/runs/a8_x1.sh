#!/usr/bin/env bash
# Fifth session: MlaValueWgmma with all 8 K steps in flight (wgmma-a8) through the fused-kernel,
# graph and reliability tests and under memcheck, synccheck and racecheck at 12 heads, then
# against the other kernels over the grid. One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 570 bash bench/results/2026-11-30-h200/runs/a8_x1.sh   (results under $OUT/a8)
S=.gpu_stage
O=${OUT:?}/a8
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 120 $S/run.sh --out="$O/suite" \
  --filter='Heads/TileKernelTest.*:GraphTileKernelTest.*:Reliability*:MlaGpuTest.*' \
  >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 100 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --rows=16,32,64,128,256,512,1024 \
  --modes=fused-split,fused-wgmma-p4,fused-wgmma-k2,fused-wgmma-a8,fused-tile64,fused-tile128,bmm,auto \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 150 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,synccheck,racecheck \
  --sanitize-shards=2 --sanitize-jobs=6 \
  --sanitize-filter='Heads/TileKernelTest.*/H12:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz a8

#!/usr/bin/env bash
# Fifth session: MlaValueWgmma with K split over a cluster of 4 (wgmma-k4, removed at 0e51cea
# when it was never within 3%) measured again with the branch-free gate, where few heads leave
# the GPU idle; its tests and memcheck and racecheck at 12 heads. One H200, from the repo root
# after tools/stage_gpu.sh:   timeout 400 bash bench/results/2026-11-30-h200/runs/k4_x1.sh
S=.gpu_stage
O=${OUT:?}/k4
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" --heads=8,12,16,32,64 \
  --rows=16,32,64,128,256,512 \
  --modes=fused-split,fused-wgmma-p4,fused-wgmma-k2,fused-wgmma-a8,fused-wgmma-k4,auto \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 100 $S/run.sh --out="$O/suite" --filter='Heads/TileKernelTest.*:GraphTileKernelTest.*' \
  >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 120 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,racecheck \
  --sanitize-shards=2 --sanitize-jobs=4 \
  --sanitize-filter='Heads/TileKernelTest.*/H12:GraphTileKernelTest.*' >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz k4

#!/usr/bin/env bash
# Sixth session, ninth call: the 64 x 64 pipeline's 5-7% since 7d820e6 (not the gate layout:
# pad11_x1.sh). The same kernels compiled with launch bounds that name a minimum of one block
# (135 registers instead of 96 for the 64 x 64 ones), against as they are and d21da82's binary.
# One H200, from the repo root after tools/stage_gpu.sh (d21da82's tail_bench staged as
# tail_bench_d21da82):
#   timeout 590 bash bench/results/2026-11-30-h200/runs/lb12_x1.sh   (results under $OUT/lb12)
S=.gpu_stage
O=${OUT:?}/lb12
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
SHAPES="--heads=12,64,96,128 --rows=16,32,64,128,512"
timeout 90 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" $SHAPES \
  --modes=fused-wgmma-p4,fused-wgmma-p4-lb1,fused-wgmma-a8,fused-wgmma-a8-lb1,fused-wgmma-n128,fused-wgmma-n128-lb1,peer \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
[ -x $S/bin/tail_bench_d21da82 ] && timeout 60 $S/bin/tail_bench_d21da82 --commit=d21da82 \
  --csv="$O/tail_bench_d21da82.csv" $SHAPES --modes=fused-wgmma-p4,peer \
  >"$O/tail_bench_d21da82.log" 2>&1
echo "d21da82 rc $?" >>"$O/rc.txt"
timeout 100 $S/run.sh --out="$O/suite" --filter='Heads/TileKernelTest.*/H12:GraphTileKernelTest.*' \
  >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz lb12

#!/usr/bin/env bash
# Sixth session, eighth call: why the 64 x 64 pipeline measured 5-7% slower (against the peer)
# at 96 heads x 16-64 rows and 12 x 512 than at d21da82: the padded gate tile rows of d21da82
# against the swizzled ones, in the same binary, and d21da82's own binary (staged as
# tail_bench_d21da82), twice each, interleaved.
# One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/pad11_x1.sh   (results under $OUT/pad11)
S=.gpu_stage
O=${OUT:?}/pad11
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
SHAPES="--heads=12,64,96,128 --rows=16,32,64,512"
for round in 1 2; do
  timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" $SHAPES \
    --modes=fused-wgmma-p4,fused-wgmma-p4-pad,fused-wgmma-a8,fused-wgmma-a8-pad,fused-wgmma-n128,fused-wgmma-n128-pad,peer \
    >>"$O/tail_bench.log" 2>&1
  echo "round $round rc $?" >>"$O/rc.txt"
  [ -x $S/bin/tail_bench_d21da82 ] && timeout 60 $S/bin/tail_bench_d21da82 --commit=d21da82 \
    --csv="$O/tail_bench_d21da82.csv" $SHAPES --modes=fused-wgmma-p4,fused-wgmma-a8,peer \
    >>"$O/tail_bench_d21da82.log" 2>&1
  echo "round $round d21da82 rc $?" >>"$O/rc.txt"
done
timeout 100 $S/run.sh --out="$O/suite" --filter='Heads/TileKernelTest.*/H12:GraphTileKernelTest.*' \
  >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz pad11

#!/usr/bin/env bash
# Ninth session, second call (one H200), from the repo root after tools/stage_gpu.sh (bf9badd) with
# 6ea4cfb's tail_bench copied to .gpu_stage/extra/:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/sig33_x1.sh   (results under $OUT/sig33)
# Sigmoids early in MlaValueWgmma's 4-stage pipeline only, and in -ws from step 4, 6 or after the
# last step (MLA_TAIL_WS_SIGMOID_FROM=4/6/8), against 6ea4cfb: the plain suite (ws from 4), the
# fused kernels' tile tests with ws from 6 and 8, then the grid: every MlaValueWgmma
# configuration, -ws and auto with both binaries, -ws alone with 6 and 8, all alternated twice.
S=.gpu_stage
O=${OUT:?}/sig33
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
for f in 6 8; do
  MLA_TAIL_WS_SIGMOID_FROM=$f timeout 100 $S/tests/mla_gpu_test --gtest_filter='*TileKernel*' \
    >"$O/tile_ws$f.log" 2>&1
  echo "tile tests ws$f rc $?" >>"$O/rc.txt"
done
H=--heads=8,12,16,32,64,96,128
R=--rows=16,32,64,128,256,512,1024
M=fused-wgmma-a8n32,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-ws,auto
for i in 1 2; do
  echo "# run $i new" >>"$O/tail_bench.csv"
  timeout 100 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" $H $R --modes=$M \
    >>"$O/tail_bench.log" 2>&1
  echo "$i new rc $?" >>"$O/rc.txt"
  echo "# run $i old" >>"$O/tail_bench.csv"
  timeout 100 $S/extra/tail_bench_6ea4cfb --commit=6ea4cfb --csv="$O/tail_bench.csv" $H $R \
    --modes=$M >>"$O/tail_bench.log" 2>&1
  echo "$i old rc $?" >>"$O/rc.txt"
  for f in 6 8; do
    echo "# run $i ws$f" >>"$O/tail_bench.csv"
    MLA_TAIL_WS_SIGMOID_FROM=$f timeout 60 $S/bin/tail_bench --commit="$C" \
      --csv="$O/tail_bench.csv" $H $R --modes=fused-wgmma-ws >>"$O/tail_bench.log" 2>&1
    echo "$i ws$f rc $?" >>"$O/rc.txt"
  done
done
cd "$OUT" && tar czf results.tgz sig33 && rm -rf sig33

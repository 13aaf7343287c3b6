#!/usr/bin/env bash
# Fifth session, first call: MlaValueStream (cp.async-fed, W_UV stationary, two workers a block)
# through the GPU suite, then against the other fused kernels, the BMM path and the cuBLASLt peer
# at the large half of the grid. One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 570 bash bench/results/2026-11-30-h200/runs/stream5_x1.sh   (results under $OUT/stream5)
S=.gpu_stage
O=${OUT:?}/stream5
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.log" 2>&1; echo "suite rc $?" >>"$O/rc.txt"
timeout 200 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=16,32,64,96,128 --rows=64,128,256,512,1024 \
  --modes=fused-stream,fused-wgmma-p4,fused-tile128,bmm,auto,peer >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_small.csv" \
  --heads=8,12,64,128 --rows=16,32 --modes=fused-stream,auto >"$O/tail_bench_small.log" 2>&1
echo "tail_bench small rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz stream5

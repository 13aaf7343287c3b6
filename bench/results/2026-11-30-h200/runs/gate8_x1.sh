#!/usr/bin/env bash
# Fifth session, sixth call: the branch-free gate (device::GatePairs) in every kernel. The whole
# GPU suite (with gate_math_gpu_test: every bf16 gate), then the grid with every fused kernel
# forced, the BMM path, the dispatched path and the cuBLASLt peer, and MlaValueStream's
# configurations at the large half. One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 570 bash bench/results/2026-11-30-h200/runs/gate8_x1.sh   (results under $OUT/gate8)
S=.gpu_stage
O=${OUT:?}/gate8
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.log" 2>&1; echo "suite rc $?" >>"$O/rc.txt"
KERNELS=fused-split,fused-tile64,fused-tile128,fused-wgmma-p4,fused-wgmma-k2,fused-stream
timeout 200 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
for v in 6:0:regs 4:0:regs; do
  echo "# MLA_TAIL_EXPERIMENT_STREAM=$v" >>"$O/tail_bench_stream.csv"
  MLA_TAIL_EXPERIMENT_STREAM=$v timeout 60 $S/bin/tail_bench --commit="$C" \
    --csv="$O/tail_bench_stream.csv" --heads=16,32,64,96,128 --rows=128,256,512,1024 \
    --modes=fused-stream >>"$O/tail_bench.log" 2>&1
  echo "tail_bench $v rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz gate8

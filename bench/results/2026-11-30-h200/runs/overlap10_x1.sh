#!/usr/bin/env bash
# Sixth session, sixth call: MlaValueWgmma with each step's MMAs left running while the next
# step's copies are waited for and issued (wgmma.wait_group 1; a pipeline then keeps one step
# fewer in flight), against the same configurations without, and the fused kernels' tests.
# One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/overlap10_x1.sh   (results under $OUT/overlap10)
S=.gpu_stage
O=${OUT:?}/overlap10
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 150 $S/run.sh --out="$O/suite" \
  --filter='Heads/TileKernelTest.*:GraphTileKernelTest.*:MlaGpuTest.*' >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 100 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=16,32,64,96,128 --rows=128,256,512,1024 \
  --modes=fused-wgmma-persistent,fused-wgmma-persistent-o >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 120 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_small.csv" \
  --rows=16,32,64,128,256,512 \
  --modes=fused-wgmma-a8,fused-wgmma-a8-o,fused-wgmma-k2,fused-wgmma-k2-o,fused-wgmma-p4,fused-wgmma-p4-o \
  >"$O/tail_bench_small.log" 2>&1
echo "tail_bench_small rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz overlap10

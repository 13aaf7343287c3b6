#!/usr/bin/env bash
# The fused kernels' experiment runs (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/wgmma_x1.sh   (results under $OUT/wg)
# The tile kernels' tests (every variant, incl. the PDL late-writer test), then every fused
# kernel forced and the BMM path over the grid, then the tail after an upstream kernel.
S=.gpu_stage
O=${OUT:?}/wg
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
F='*TileKernel*:*Variant*:ReliabilityGpuTest.InputsWritten*'
timeout 150 $S/run.sh --out="$O/suite" --filter="$F" >"$O/suite.out" 2>&1
M=fused-split,fused-split16,fused-tile64,fused-tile128,bmm,fused-wgmma,fused-wgmma-p4
M=$M,fused-wgmma-k2,fused-wgmma-k4
timeout 240 $S/bin/tail_bench --commit="$C" --heads=8,12,16,32,64,96,128 \
  --rows=1,4,16,32,64,128,256,512,1024 --modes=$M \
  --csv="$O/tail_bench_kernels.csv" >"$O/tail_bench_kernels.log" 2>&1
for e in 0 1000; do
  timeout 40 $S/bin/tail_bench --commit="$C" --upstream --upstream_epilogue_ns=$e \
    --heads=12,64 --rows=1,16 --csv="$O/tail_bench_upstream_e$e.csv" \
    >"$O/tail_bench_upstream_e$e.log" 2>&1
done
cd "$OUT" && tar czf results.tgz wg

#!/usr/bin/env bash
# MlaValueWgmma's GPU runs (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/wgmma_x1.sh   (results under $OUT/wg)
# The tile kernels' tests (every variant, incl. the PDL late-writer test), then every fused
# kernel forced and the BMM path over the grid, then the tile tests under memcheck and racecheck.
S=.gpu_stage
O=${OUT:?}/wg
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
F='*TileKernel*:*Variant*:ReliabilityGpuTest.InputsWritten*'
timeout 150 $S/run.sh --out="$O/suite" --filter="$F" >"$O/suite.out" 2>&1
M=fused-split,fused-tile64,fused-tile128,bmm,fused-wgmma64,fused-wgmma64x64,fused-wgmma64k4
M=$M,fused-wgmma64k8,fused-wgmma64x64k4,fused-wgmma128,fused-wgmma128k2,fused-wgmma128k4
timeout 260 $S/bin/tail_bench --commit="$C" --heads=8,12,16,32,64,96,128 \
  --rows=1,4,16,32,64,128,256,512,1024 --modes=$M \
  --csv="$O/tail_bench_wgmma.csv" >"$O/tail_bench_wgmma.log" 2>&1
timeout 100 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,racecheck \
  --sanitize-filter='*TileKernelTest.BitExact*/H12:*TileKernelStrided*' --sanitize-jobs=4 \
  >"$O/sanitize.out" 2>&1
cd "$OUT" && tar czf results.tgz wg

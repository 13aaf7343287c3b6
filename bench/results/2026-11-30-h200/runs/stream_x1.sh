#!/usr/bin/env bash
# MlaValueStream's GPU run (one H200) at af90407, the commit that had the kernel (reverted after it:
# never the fastest; NOTES.md "Large batches"), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/stream_x1.sh   (results under $OUT/stream)
# The fused kernels' tests (every variant, captured and updated in graphs, under a late-writing
# upstream kernel), the large and middle shapes with the stream kernel and its rivals forced, then
# the graph and reliability tests of the fused kernels under the four sanitizers.
S=.gpu_stage
O=${OUT:?}/stream
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
F='*TileKernel*:*Variant*:ReliabilityGpuTest.InputsWritten*'
timeout 150 $S/run.sh --out="$O/suite" --filter="$F" >"$O/suite.out" 2>&1
timeout 90 $S/bin/tail_bench --commit="$C" --heads=8,12,16,32,64,96,128 \
  --rows=64,128,256,512,1024 --modes=fused-stream,bmm,fused-tile64,fused-tile128,fused-wgmma-p4 \
  --csv="$O/tail_bench_stream.csv" >"$O/tail_bench_stream.log" 2>&1
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests --sanitize --sanitize-jobs=8 \
  --sanitize-filter='GraphTileKernelTest.*:ReliabilityGpuTest.InputsWritten*' >"$O/sanitize.out" 2>&1
cd "$OUT" && tar czf results.tgz stream

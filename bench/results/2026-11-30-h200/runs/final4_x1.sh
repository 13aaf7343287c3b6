#!/usr/bin/env bash
# Fourth session, last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 585 bash bench/results/2026-11-30-h200/runs/final4_x1.sh   (results under $OUT/final4)
# The benchmarks (bench4_x1.sh, without the A/B), the whole plain suite, the main job, then the
# four sanitizers over the fused kernels' tests at 3 and 12 heads, the BMM path at 12 heads, the
# strided, NaN-gate and graph tests of the fused kernels, and the PDL late-writer test.
S=.gpu_stage
export OUT
timeout 300 bash bench/results/2026-11-30-h200/runs/bench4_x1.sh
O=$OUT/final4
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 30 $S/bin/decode_demo --layers=61 --steps=40 >"$O/demo.log" 2>&1
echo "demo rc $?" >>"$O/demo.log"
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests --sanitize --sanitize-jobs=8 \
  --sanitize-filter='Heads/TileKernelTest.*/H3:Heads/TileKernelTest.*/H12:Heads/GridTest.*/H12:MlaGpuTest.TileKernelStridedInactiveAndRandom:MlaGpuTest.StridedViews:MlaGpuTest.InactiveRowsAreZeroDespiteNan:GraphTileKernelTest.*:ReliabilityGpuTest.InputsWrittenUpstreamUntilItsEndAreSeen' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cd "$OUT" && tar czf results.tgz bench4 final4

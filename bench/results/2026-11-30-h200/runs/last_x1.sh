#!/usr/bin/env bash
# The last check of the session (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 280 bash bench/results/2026-11-30-h200/runs/last_x1.sh   (results under $OUT/last)
# The whole plain suite, the main job, then the fused kernels' tests at 12 heads and their graph
# test under memcheck and racecheck.
S=.gpu_stage
O=${OUT:?}/last
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 110 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 30 $S/bin/decode_demo --layers=61 --steps=40 >"$O/demo.log" 2>&1
echo "demo rc $?" >>"$O/demo.log"
timeout 100 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,racecheck \
  --sanitize-filter='*TileKernelTest.BitExact*/H12:GraphTileKernelTest.*' --sanitize-jobs=4 \
  >"$O/sanitize.out" 2>&1
cd "$OUT" && tar czf results.tgz last

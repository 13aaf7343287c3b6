#!/usr/bin/env bash
# Fourth session, last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 585 bash bench/results/2026-11-30-h200/runs/final7_x1.sh
# After MlaValueTile's prefetch was limited to W <= 4096 and the rule took its 64-column blocks at W = 8192: every benchmark
# (bench4_x1.sh), the whole plain suite, memcheck over the fused kernels' tests at 12 heads and
# both paths at 12 heads.
S=.gpu_stage
export OUT
timeout 200 bash bench/results/2026-11-30-h200/runs/bench4_x1.sh
O=$OUT/final7
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 150 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,synccheck \
  --sanitize-shards=2 --sanitize-jobs=4 \
  --sanitize-filter='Heads/TileKernelTest.*/H12:Heads/GridTest.*/H12:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cd "$OUT" && tar czf results.tgz bench4 final7

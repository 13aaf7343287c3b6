#!/usr/bin/env bash
# Fifth session, last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 585 bash bench/results/2026-11-30-h200/runs/final9_x1.sh
# After the branch-free gate and the redrawn rule: every benchmark (bench4_x1.sh), the whole
# plain suite, and the four sanitizers over every kernel's tests at 12 heads (memcheck, synccheck,
# initcheck: fused kernels, both paths, the graph tests of each fused kernel, the gate math;
# racecheck: the fused kernels and both paths).
S=.gpu_stage
export OUT
timeout 200 bash bench/results/2026-11-30-h200/runs/bench4_x1.sh
O=$OUT/final9
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 120 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,synccheck,initcheck \
  --sanitize-shards=2 --sanitize-jobs=6 \
  --sanitize-filter='Heads/TileKernelTest.*/H12:Heads/GridTest.*/H12:GraphTileKernelTest.*:GateMath*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
timeout 150 $S/run.sh --out="$O/racecheck" --no-tests --sanitize=racecheck \
  --sanitize-shards=4 --sanitize-jobs=4 \
  --sanitize-filter='Heads/TileKernelTest.*/H12:Heads/GridTest.*/H12' \
  >"$O/racecheck.out" 2>&1
echo "racecheck rc $?" >>"$O/racecheck.out"
cd "$OUT" && tar czf results.tgz bench4 final9

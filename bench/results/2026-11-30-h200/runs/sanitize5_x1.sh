#!/usr/bin/env bash
# Fifth session: memcheck and synccheck at the large head counts (the fused kernels' tests at 63,
# 64 and 128 heads, both paths at 128 heads), after the branch-free gate and the all-in-flight
# variant. One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 330 bash bench/results/2026-11-30-h200/runs/sanitize5_x1.sh   (results under $OUT/sanitize5)
S=.gpu_stage
O=${OUT:?}/sanitize5
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 300 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=memcheck,synccheck \
  --sanitize-shards=3 --sanitize-jobs=8 \
  --sanitize-filter='Heads/TileKernelTest.*/H63:Heads/TileKernelTest.*/H64:Heads/TileKernelTest.*/H128:Heads/GridTest.*/H128' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cd "$OUT" && tar czf results.tgz sanitize5

#!/usr/bin/env bash
# Fourth session, last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 585 bash bench/results/2026-11-30-h200/runs/final5_x1.sh
# After the dispatch rule's last change (MlaValueTile where its grid fills whole waves): every
# benchmark (bench4_x1.sh), the whole plain suite, then racecheck over the fused kernels' tests
# at 3 and 12 heads and both paths at 12 heads, which final4_x1.sh's 200 s did not reach (the
# kernels are those of 043ec8a, where memcheck, initcheck and synccheck covered these tests).
S=.gpu_stage
export OUT
timeout 200 bash bench/results/2026-11-30-h200/runs/bench4_x1.sh
O=$OUT/final5
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 250 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=racecheck --sanitize-shards=4 \
  --sanitize-jobs=4 \
  --sanitize-filter='Heads/TileKernelTest.*/H3:Heads/TileKernelTest.*/H12:Heads/GridTest.*/H12' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cd "$OUT" && tar czf results.tgz bench4 final5

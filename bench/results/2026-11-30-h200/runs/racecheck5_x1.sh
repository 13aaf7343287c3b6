#!/usr/bin/env bash
# Fifth session: racecheck at the large head counts (the fused kernels' tests at 64 heads, both
# paths at 128 heads), 4 shards, cut at 240 s. One H200, from the repo root after
# tools/stage_gpu.sh:   timeout 280 bash bench/results/2026-11-30-h200/runs/racecheck5_x1.sh
S=.gpu_stage
O=${OUT:?}/racecheck5
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 240 $S/run.sh --out="$O/racecheck" --no-tests --sanitize=racecheck \
  --sanitize-shards=4 --sanitize-jobs=8 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:Heads/GridTest.*/H128' >"$O/racecheck.out" 2>&1
echo "racecheck rc $?" >>"$O/racecheck.out"
cd "$OUT" && tar czf results.tgz racecheck5

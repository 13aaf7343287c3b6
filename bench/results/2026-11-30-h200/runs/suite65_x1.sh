#!/usr/bin/env bash
# Twelfth session, tenth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 200 bash bench/results/2026-11-30-h200/runs/suite65_x1.sh   (results in $OUT/results.tgz)
# The plain suite at the session's last code (the 8-row blocks' condition in one place; the
# kernels' .text unchanged since 4b15737).
O=${OUT:?}/suite65
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 150 .gpu_stage/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
cp "$O/suite/summary.txt" "$O/gpu_suite_summary.txt" 2>/dev/null
rm -rf "$O/suite"
(cd "$OUT" && tar czf results.tgz suite65 && rm -rf suite65)

#!/usr/bin/env bash
# Eleventh session, seventh call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/bench57_x1.sh   (results in $OUT/results.tgz)
# The staged benchmark runner (tools/gpu_benchmarks.sh, .gpu_stage/benchmarks.sh) on its first
# GPU run: every benchmark the README quotes, the table and the main job, at the last code
# (e99600e's, with comments and the runner since).
timeout 280 .gpu_stage/benchmarks.sh --out="$OUT/bench57" \
  --after='(cd "$OUT" && tar czf results.tgz bench57)'
echo "benchmarks.sh rc $?" >>"$OUT/bench57/rc.txt"
(cd "$OUT" && tar czf results.tgz bench57 && rm -rf bench57)

#!/usr/bin/env bash
# Fifth session, last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 585 bash bench/results/2026-11-30-h200/runs/final10_x1.sh
# After MlaValue took 64 x 16 rows back (the rule's only change since a504da6, whose kernels
# passed the four sanitizers in final9_x1.sh): every benchmark (bench4_x1.sh), the whole plain
# suite, and the main job (61 layers x 40 steps).
S=.gpu_stage
export OUT
timeout 220 bash bench/results/2026-11-30-h200/runs/bench4_x1.sh
O=$OUT/final10
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$O/decode_demo_61_layers.log"
cd "$OUT" && tar czf results.tgz bench4 final10

#!/usr/bin/env bash
# Fourth session: the main job on the last code (one H200), from the repo root after
# tools/stage_gpu.sh:   timeout 120 bash bench/results/2026-11-30-h200/runs/demo4_x1.sh
S=.gpu_stage
mkdir -p "$OUT/demo4"
export MLA_TAIL_REQUIRE_GPU=1
timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$OUT/demo4/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$OUT/demo4/decode_demo_61_layers.log"

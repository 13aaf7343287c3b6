#!/usr/bin/env bash
# Fifth session, last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 585 bash bench/results/2026-11-30-h200/runs/final11_x1.sh
# After the all-in-flight MlaValueWgmma joined the rule (its tests and memcheck, synccheck and
# racecheck ran in a8_x1.sh): every benchmark (bench4_x1.sh, with wgmma-a8 among the forced
# kernels), the whole plain suite, initcheck over the fused kernels at 12 heads, the main job.
S=.gpu_stage
export OUT
sed 's/fused-wgmma-k2$/fused-wgmma-k2,fused-wgmma-a8/' bench/results/2026-11-30-h200/runs/bench4_x1.sh \
  >/tmp/bench4_a8.sh
timeout 220 bash /tmp/bench4_a8.sh
O=$OUT/final11
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 60 $S/run.sh --out="$O/sanitize" --no-tests --sanitize=initcheck \
  --sanitize-shards=2 --sanitize-jobs=4 \
  --sanitize-filter='Heads/TileKernelTest.*/H12:GraphTileKernelTest.*' >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$O/decode_demo_61_layers.log"
cd "$OUT" && tar czf results.tgz bench4 final11

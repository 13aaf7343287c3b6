#!/usr/bin/env bash
# Ninth session, sixth call (one H200), from the repo root after tools/stage_gpu.sh (the
# binaries of final25):
#   timeout 590 bash bench/results/2026-11-30-h200/runs/sanitize37_x1.sh   (results under $OUT/sanitize37)
# memcheck, synccheck, initcheck and racecheck over the fused kernels' tests at 12 and 64 heads
# (every MlaValueWgmma configuration forced; the 4-stage pipeline's and MlaValueWgmma-ws's early sigmoids are new), the strided and
# inactive-row test, and their graph test.
S=.gpu_stage
O=${OUT:?}/sanitize37
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
timeout 530 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:Heads/TileKernelTest.*/H12:MlaGpuTest.TileKernelStridedInactiveAndRandom:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
cd "$OUT" && tar czf results.tgz sanitize37/sanitize.out sanitize37/sanitizer_summary.txt && rm -rf sanitize37

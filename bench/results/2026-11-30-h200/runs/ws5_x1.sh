#!/usr/bin/env bash
# Seventh session, fourth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/ws5_x1.sh   (results under $OUT/ws5)
# The four-warpgroup experiment again (wgmma-ws4), its gate warpgroup's 16 gate loads a thread
# now issued as asm volatile loads before it waits for the values: is a late gate load what made
# it 10% slower than wgmma-ws in ws2/ws3?
S=.gpu_stage
O=${OUT:?}/ws5
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 30 $S/tests/mla_gpu_test --gtest_filter='Heads/TileKernelTest.*/H64' >"$O/smoke.log" 2>&1
rc=$?
echo "smoke rc $rc" >>"$O/rc.txt"
if [ $rc -ne 0 ]; then cd "$OUT" && tar czf results.tgz ws5; exit 1; fi
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=32,64,96,128 --rows=256,512,1024 --modes=fused-wgmma-ws,fused-wgmma-ws4 \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz ws5

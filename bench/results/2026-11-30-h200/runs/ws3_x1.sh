#!/usr/bin/env bash
# Seventh session, third call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/ws3_x1.sh   (results under $OUT/ws3)
# The three-warpgroup warp-specialized kernel (wgmma-ws, as in ws1, with per-thread arrivals on
# the gate buffer's "empty" barrier) against the four-warpgroup one (wgmma-ws4, as in ws2) and
# the block-synchronous persistent kernel, in one run; Nsight Compute of the three at
# 128 x 1024; memcheck and racecheck over the fused kernels' tests at 64 heads.
S=.gpu_stage
O=${OUT:?}/ws3
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 30 $S/tests/mla_gpu_test --gtest_filter='Heads/TileKernelTest.*/H64' >"$O/smoke.log" 2>&1
rc=$?
echo "smoke rc $rc" >>"$O/rc.txt"
if [ $rc -ne 0 ]; then cd "$OUT" && tar czf results.tgz ws3; exit 1; fi
timeout 90 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=16,32,64,96,128 --rows=128,256,512,1024 \
  --modes=fused-wgmma-persistent,fused-wgmma-ws,fused-wgmma-ws4,peer \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 40 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 \
  --modes=fused-wgmma-persistent,fused-wgmma-ws,fused-wgmma-ws4 \
  >"$O/tail_bench_large.log" 2>&1
echo "tail_bench_large rc $?" >>"$O/rc.txt"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for m in wgmma-persistent wgmma-ws wgmma-ws4; do
  timeout 40 "$NCU" -k regex:MlaValueW -s 4 -c 1 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats \
    $S/bin/tail_bench --heads=128 --rows=1024 --modes=fused-$m --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.$m.h128.r1024.txt" 2>&1
done
echo "ncu done" >>"$O/rc.txt"
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,racecheck --sanitize-shards=4 --sanitize-jobs=8 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz ws3

#!/usr/bin/env bash
# Seventh session, second call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/ws2_x1.sh   (results under $OUT/ws2)
# The warp-specialized persistent kernel with its gate in a fourth warpgroup (wgmma-ws, forced only): the whole plain suite (every
# fused-kernel test forces it too); against the block-synchronous persistent kernel and the
# others from 128 rows, and at 2048-4096 rows against the BMM path and the peer; the four
# sanitizers over the fused kernels' tests at 64 heads (several tiles a block) and their graph test.
S=.gpu_stage
O=${OUT:?}/ws2
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
# A hang (a barrier that never completes) stops the call here, not after every timeout below.
timeout 30 $S/tests/mla_gpu_test --gtest_filter='Heads/TileKernelTest.*/H64' >"$O/smoke.log" 2>&1
rc=$?
echo "smoke rc $rc" >>"$O/rc.txt"
if [ $rc -ne 0 ]; then cd "$OUT" && tar czf results.tgz ws2; exit 1; fi
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 90 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=16,32,64,96,128 --rows=128,256,512,1024 \
  --modes=fused-wgmma-persistent,fused-wgmma-ws,peer \
  >"$O/tail_bench.log" 2>&1
echo "tail_bench rc $?" >>"$O/rc.txt"
timeout 50 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 \
  --modes=fused-wgmma-persistent,fused-wgmma-ws,bmm,peer \
  >"$O/tail_bench_large.log" 2>&1
echo "tail_bench_large rc $?" >>"$O/rc.txt"
timeout 240 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=12 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz ws2

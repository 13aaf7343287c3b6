#!/usr/bin/env bash
# Seventh session, sixth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 200 bash bench/results/2026-11-30-h200/runs/even6_x1.sh   (results under $OUT/even6)
# MlaValueWgmma-ws's grid as the fewest blocks with the same number of rounds of
# tiles (MLA_WS_EVEN=1; 96 x 256: 96 blocks of 2 tiles instead of 132 with 60 of them doing a
# second), against the grid of min(tiles, multiprocessors), three alternations.
S=.gpu_stage
O=${OUT:?}/even6
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 30 $S/tests/mla_gpu_test --gtest_filter='Heads/TileKernelTest.*/H64' >"$O/smoke.log" 2>&1
echo "smoke rc $?" >>"$O/rc.txt"
MLA_WS_EVEN=1 timeout 30 $S/tests/mla_gpu_test --gtest_filter='Heads/TileKernelTest.*/H64' >"$O/smoke_even.log" 2>&1
echo "smoke even rc $?" >>"$O/rc.txt"
for i in 1 2 3; do
  for even in 0 1; do
    echo "# run $i, even $even" >>"$O/tail_bench.csv"
    if [ $even = 1 ]; then export MLA_WS_EVEN=1; else unset MLA_WS_EVEN; fi
    timeout 40 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
      --heads=16,32,64,96,128 --rows=256,512,1024 --modes=fused-wgmma-ws \
      >>"$O/tail_bench.log" 2>&1
    echo "tail_bench $i $even rc $?" >>"$O/rc.txt"
  done
done
unset MLA_WS_EVEN
cd "$OUT" && tar czf results.tgz even6

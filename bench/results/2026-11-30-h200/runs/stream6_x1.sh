#!/usr/bin/env bash
# Fifth session, second call: MlaValueStream's configurations (MLA_TAIL_EXPERIMENT_STREAM =
# ring stages : tiles of L2 bulk prefetch ahead) at the large half of the grid, and the
# fused-kernel tests under the prefetching one. One H200, from the repo root after
# tools/stage_gpu.sh:
#   timeout 570 bash bench/results/2026-11-30-h200/runs/stream6_x1.sh   (results under $OUT/stream6)
S=.gpu_stage
O=${OUT:?}/stream6
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
MLA_TAIL_EXPERIMENT_STREAM=6:2 timeout 100 $S/tests/mla_gpu_test \
  --gtest_filter='Heads/TileKernelTest.*' >"$O/mla_gpu_test_6_2.log" 2>&1
echo "mla_gpu_test 6:2 rc $?" >>"$O/rc.txt"
for v in 6:0 6:1 6:2 6:4 4:0 4:2; do
  echo "# MLA_TAIL_EXPERIMENT_STREAM=$v" >>"$O/tail_bench.csv"
  MLA_TAIL_EXPERIMENT_STREAM=$v timeout 60 $S/bin/tail_bench --commit="$C" \
    --csv="$O/tail_bench.csv" --heads=16,32,64,96,128 --rows=128,256,512,1024 \
    --modes=fused-stream >>"$O/tail_bench.log" 2>&1
  echo "tail_bench $v rc $?" >>"$O/rc.txt"
done
echo "# small shapes" >>"$O/tail_bench.csv"
for v in 6:0 6:2; do
  echo "# MLA_TAIL_EXPERIMENT_STREAM=$v" >>"$O/tail_bench.csv"
  MLA_TAIL_EXPERIMENT_STREAM=$v timeout 30 $S/bin/tail_bench --commit="$C" \
    --csv="$O/tail_bench.csv" --heads=8,64 --rows=16,64 --modes=fused-stream \
    >>"$O/tail_bench.log" 2>&1
done
cd "$OUT" && tar czf results.tgz stream6

#!/usr/bin/env bash
# Tenth session, ninth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/suite48_x1.sh   (results in $OUT/results.tgz)
# The last commit's code (MlaValue's 8-row blocks as in final47; the BMM path's scratch only
# where that path can run): the plain suite, fault_gpu_test twice more, graph_bench.
S=.gpu_stage
O=${OUT:?}/suite48
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 40 $S/tests/fault_gpu_test --gtest_repeat=2 --gtest_brief=1 >"$O/fault_repeat.log" 2>&1
echo "fault x2 rc $?" >>"$O/rc.txt"
timeout 30 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
echo "graph_bench rc $?" >>"$O/rc.txt"
rm -rf "$O/suite"/*.xml 2>/dev/null
tar czf "$OUT/results.tgz" -C "$OUT" suite48 && rm -rf "$O"

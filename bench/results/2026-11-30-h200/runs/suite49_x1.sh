#!/usr/bin/env bash
# Tenth session, tenth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/suite49_x1.sh   (results in $OUT/results.tgz)
# The last commit (MlaValueBlockRows in place of TileRows and MlaValueRowTiles; the kernels
# byte for byte 7a5444f's): the plain suite and fault_gpu_test twice more.
S=.gpu_stage
O=${OUT:?}/suite49
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 40 $S/tests/fault_gpu_test --gtest_repeat=2 --gtest_brief=1 >"$O/fault_repeat.log" 2>&1
echo "fault x2 rc $?" >>"$O/rc.txt"
rm -rf "$O/suite"/*.xml 2>/dev/null
tar czf "$OUT/results.tgz" -C "$OUT" suite49 && rm -rf "$O"

#!/usr/bin/env bash
# Ninth session, seventh call (one H200), from the repo root after tools/stage_gpu.sh (the binaries
# of ws36):
#   timeout 120 bash bench/results/2026-11-30-h200/runs/graph38_x1.sh   (results under $OUT/graph38)
# graph_bench three times: ws36's host times (update + replay 2.63 us over a plain replay, the
# bare launch 2.48 us) were the slowest of the day, with graph/ unchanged since ecdee44.
S=.gpu_stage
O=${OUT:?}/graph38
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name --format=csv >"$O/gpu.txt" 2>&1
nproc >>"$O/gpu.txt"
for i in 1 2 3; do
  timeout 30 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >>"$O/graph_bench.log" 2>&1
  echo "graph_bench $i rc $?" >>"$O/rc.txt"
done
cd "$OUT" && tar czf results.tgz graph38 && rm -rf graph38

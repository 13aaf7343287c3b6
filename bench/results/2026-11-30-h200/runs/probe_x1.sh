#!/usr/bin/env bash
# Fourth session, first call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/probe_x1.sh   (results under $OUT/probe)
# The plain suite and graph_bench (the BMM path's one-node update), the BMM path's tests under
# the four sanitizers (MlaGate changed), the PDL probe, the rows 8-16 step of the fused kernels
# (a tail_bench sweep, and Nsight Compute's full set at 8 and 16 rows).
S=.gpu_stage
O=${OUT:?}/probe
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
$S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
timeout 40 $S/bin/pdl_probe >"$O/pdl_probe.csv" 2>"$O/pdl_probe.err"
echo "probe rc $?" >>"$O/pdl_probe.err"
timeout 40 $S/bin/tail_bench --commit="$C" --heads=12,64 --rows=8,9,10,12,14,16,24,32 \
  --modes=fused-split,fused-tile64,fused-wgmma-k2,bmm --csv="$O/tail_bench_rows.csv" \
  >"$O/tail_bench_rows.log" 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for rows in 8 16; do
  timeout 60 "$NCU" -k regex:MlaValueKernel -c 1 --set full \
    $S/bin/tail_bench --heads=12 --rows=$rows --modes=fused-split --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.full.h12.r$rows.txt" 2>&1
  timeout 60 "$NCU" -k regex:MlaValueKernel -c 1 --section SourceCounters --page source \
    --print-source=sass --csv \
    $S/bin/tail_bench --heads=12 --rows=$rows --modes=fused-split --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.source.h12.r$rows.csv" 2>&1
done
timeout 150 $S/run.sh --out="$O/sanitize" --no-tests --sanitize --sanitize-jobs=4 \
  --sanitize-filter='Paths/GraphGpuTest.ReplayEqualsEagerForEveryBucket/bmm:Paths/GraphGpuTest.PointerUpdatesReplayWithoutInstantiation/bmm:Paths/GraphGpuTest.ChildGraphEmbedding/bmm:Heads/GridTest.BothPathsBitExact/H3' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
cd "$OUT" && tar czf results.tgz probe

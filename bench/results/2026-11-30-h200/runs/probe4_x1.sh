#!/usr/bin/env bash
# Fourth session, fourth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/probe4_x1.sh   (results under $OUT/probe4)
# The fused kernels' launch_dependents at their very start (MLA_TAIL_EXPERIMENT_TRIGGER_AT_START)
# against after their last upstream reads: the whole grid with every kernel forced, the tail
# after an upstream kernel over a range of trigger-to-end windows; the suite with the early
# trigger.
S=.gpu_stage
O=${OUT:?}/probe4
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
KERNELS=fused-split,fused-tile64,fused-tile128,fused-wgmma-p4,fused-wgmma-k2
for t in late early; do
  if [ $t = early ]; then export MLA_TAIL_EXPERIMENT_TRIGGER_AT_START=1; fi
  timeout 150 $S/bin/tail_bench --commit="$C" --csv="$O/grid.$t.csv" \
    --modes=$KERNELS,bmm,auto >"$O/grid.$t.log" 2>&1
  for e in 0 1000 2000 3000 5000; do
    echo "# trigger $t epilogue $e" >>"$O/upstream.$t.csv"
    timeout 40 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
      --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=$e \
      --csv="$O/upstream.$t.csv" >>"$O/upstream.$t.log" 2>&1
  done
  echo "# trigger $t epilogue 3000 upstream without shared memory" >>"$O/upstream.$t.csv"
  timeout 40 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=3000 --upstream_smem_bytes=0 \
    --csv="$O/upstream.$t.csv" >>"$O/upstream.$t.log" 2>&1
done
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
cd "$OUT" && tar czf results.tgz probe4

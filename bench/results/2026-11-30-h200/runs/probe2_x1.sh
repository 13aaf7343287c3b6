#!/usr/bin/env bash
# Fourth session, second call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/probe2_x1.sh   (results under $OUT/probe2)
# MlaValue with its gate and lengths loads all in flight (rows sweep, SASS); the PDL probe with
# shared memory on either side (the carveout question); the tail after an upstream kernel that
# holds shared memory; Nsight Compute's source view of MlaValueWgmma and MlaValueTile at 8 and 9
# rows; the MlaValue tests.
S=.gpu_stage
O=${OUT:?}/probe2
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
timeout 60 $S/bin/tail_bench --commit="$C" --heads=8,12,32,64,128 --rows=1,8,9,16,32 \
  --modes=fused-split,auto --csv="$O/tail_bench_rows.csv" >"$O/tail_bench_rows.log" 2>&1
timeout 60 $S/bin/pdl_probe --epilogues_ns=1000 --dependent_blocks=48 --prefetch_words=16 \
  --upstream_smem=0,102400 --dependent_smem=0,17408,102400 >"$O/pdl_probe_smem.csv" \
  2>"$O/pdl_probe.err"
echo "probe rc $?" >>"$O/pdl_probe.err"
for smem in 0 102400; do
  for e in 0 1000; do
    echo "# upstream_smem $smem epilogue $e" >>"$O/tail_bench_upstream.csv"
    timeout 40 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
      --modes=up,up+pdl,up+nopdl --upstream_smem_bytes=$smem --upstream_epilogue_ns=$e \
      --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
  done
done
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUOBJDUMP" -sass -fun '_ZN3mla12_GLOBAL__N_114MlaValueKernelILi1EEEvNS_14MlaValueParamsE' \
  $S/bin/tail_bench >"$O/mla_value_1.sass" 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for mode in fused-wgmma-k2 fused-tile64; do
  for rows in 8 9; do
    timeout 60 "$NCU" -k regex:MlaValue -c 1 --section SourceCounters --page source \
      --print-source=sass --csv \
      $S/bin/tail_bench --heads=12 --rows=$rows --modes=$mode --min_layers=16 \
      --max_layers=16 --replays=1 >"$O/ncu.source.$mode.h12.r$rows.csv" 2>&1
  done
done
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
cd "$OUT" && tar czf results.tgz probe2

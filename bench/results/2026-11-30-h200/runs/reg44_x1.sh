#!/usr/bin/env bash
# Tenth session, fifth call (one H200), from the repo root after tools/stage_gpu.sh with
# 9d47e66's tail_bench copied to .gpu_stage/extra/tail_bench_old:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/reg44_x1.sh   (results in $OUT/results.tgz)
# MlaValue with its latent in registers: 8-row blocks up to 8 rows, 16-row ones to 16: the plain suite; then
# MlaValue forced and the dispatched path against 9d47e66's binary at 8-128 heads x 1-16 rows
# (new, old, new, old), and the tail after the stand-in upstream kernel (5 us window, with and
# without shared memory in the upstream) the same way.
S=.gpu_stage
O=${OUT:?}/reg44
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 150 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
for run in new old new old; do
  B=$S/bin/tail_bench
  [ $run = old ] && B=$S/extra/tail_bench_old
  echo "# run $run" >>"$O/tail_bench.csv"
  timeout 80 $B --commit="$C-$run" --csv="$O/tail_bench.csv" --heads=8,12,16,32,64,96,128 \
    --rows=1,2,4,8,9,16 --modes=fused-split,auto >>"$O/tail_bench.log" 2>&1
  echo "grid $run rc $?" >>"$O/rc.txt"
  for smem in 102400 0; do
    echo "# run $run upstream smem $smem" >>"$O/tail_bench_upstream.csv"
    timeout 30 $B --commit="$C-$run" --upstream --heads=12,64 --rows=1,16 \
      --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 --upstream_smem_bytes=$smem \
      --fused_kernel=split --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
    echo "upstream $run $smem rc $?" >>"$O/rc.txt"
  done
done
tar czf "$OUT/results.tgz" -C "$OUT" reg44 && rm -rf "$O"

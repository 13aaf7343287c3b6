#!/usr/bin/env bash
# Tenth session, sixth call (one H200), the same stage as reg44_x1.sh (8-row MlaValue blocks
# with the latent in registers at every head count, 9d47e66's binary as tail_bench_old):
#   timeout 300 bash bench/results/2026-11-30-h200/runs/up45_x1.sh   (results in $OUT/results.tgz)
# MlaValue after the stand-in upstream kernel (5 us window; 100 KB of shared memory a block, and
# none) at 8-128 heads x 1-8 rows, new and old alternated twice: where the rule should run the
# 8-row blocks.
S=.gpu_stage
O=${OUT:?}/up45
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
for run in new old new old; do
  B=$S/bin/tail_bench
  [ $run = old ] && B=$S/extra/tail_bench_old
  for smem in 102400 0; do
    echo "# run $run upstream smem $smem" >>"$O/tail_bench_upstream.csv"
    timeout 60 $B --commit="$C-$run" --upstream --heads=8,16,32,64,96,128 --rows=1,2,4,8 \
      --modes=up,up+pdl --upstream_epilogue_ns=5000 --upstream_smem_bytes=$smem \
      --fused_kernel=split --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
    echo "upstream $run $smem rc $?" >>"$O/rc.txt"
  done
done
tar czf "$OUT/results.tgz" -C "$OUT" up45 && rm -rf "$O"

#!/usr/bin/env bash
# Seventh session, seventh call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/final18_x1.sh   (results under $OUT/final18)
# After MlaValueWgmma-ws's launcher took the balanced grid (even6) and caches the SM count:
# every benchmark the README quotes (as final16_x1.sh), the whole plain suite, the main job,
# then the four sanitizers over the fused kernels' tests at 64 heads, the strided and
# inactive-row test, and their graph test.
S=.gpu_stage
O=${OUT:?}/final18
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
KERNELS=fused-split,fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-n128,fused-wgmma-ws
timeout 40 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
timeout 150 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
timeout 40 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 --rows=16,64,256 \
  --modes=$KERNELS,bmm,auto,peer --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
timeout 130 python3 $S/scripts/torch_peer.py --commit="$C" --csv="$O/torch_peer.csv" \
  >"$O/torch_peer.log" 2>&1
for e in 0 1000 2000 3000 5000; do
  echo "# epilogue $e, upstream 100 KiB shared memory a block, rewrites the latent" \
    >>"$O/tail_bench_upstream.csv"
  timeout 25 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=$e \
    --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
done
echo "# epilogue 3000, upstream without shared memory, rewrites the latent" \
  >>"$O/tail_bench_upstream.csv"
timeout 25 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
  --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=3000 --upstream_smem_bytes=0 \
  --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 --modes=auto,bmm,peer >"$O/tail_bench_large.log" 2>&1
# The all-in-flight MlaValueWgmma (140 KB a block) against MlaValue after the upstream kernel,
# where the rule picks the former at 32-128 rows.
for k in auto split; do
  echo "# epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent, fused kernel $k" \
    >>"$O/tail_bench_upstream_a8.csv"
  timeout 30 $S/bin/tail_bench --commit="$C" --upstream --heads=12,16,32 --rows=32,64 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 --fused_kernel=$k \
    --csv="$O/tail_bench_upstream_a8.csv" >>"$O/tail_bench_upstream_a8.log" 2>&1
done
timeout 20 $S/bin/pdl_probe --epilogues_ns=1000 --dependent_blocks=48 --prefetch_words=16 \
  --upstream_smem=0,102400 --dependent_smem=0,17408 >"$O/pdl_probe.csv" 2>"$O/pdl_probe.err"
python3 -c "import matplotlib" 2>/dev/null && python3 $S/scripts/report.py "$O" >"$O/table.md" 2>&1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$O/decode_demo_61_layers.log"
timeout 250 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=12 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:MlaGpuTest.TileKernelStridedInactiveAndRandom:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cd "$OUT" && tar czf results.tgz final18

#!/usr/bin/env bash
# Ninth session, fifth call (one H200), from the repo root after tools/stage_gpu.sh with 6ea4cfb's
# tail_bench copied to .gpu_stage/extra/:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/ws36_x1.sh   (results under $OUT/ws36)
# MlaValueWgmma-ws with early sigmoids where each block has one tile: the plain suite; the
# warp-specialized kernel forced and the dispatched path against 6ea4cfb's binary at 16-128 heads
# x 128-1024 rows, alternated twice; every benchmark the README quotes and the main job (as
# final34_x1.sh); all of that packed into results.tgz; then the four sanitizers over the fused
# kernels' tests at 12 and 64 heads (as sanitize35_x1.sh) into sanitize.tgz.
S=.gpu_stage
O=${OUT:?}/ws36
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/rc.txt"
timeout 40 $S/tests/fault_gpu_test --gtest_repeat=3 --gtest_brief=1 >"$O/fault_repeat.log" 2>&1
echo "fault x3 rc $?" >>"$O/rc.txt"
KERNELS=fused-split,fused-wgmma-a8n32,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-ws
timeout 40 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
echo "graph_bench rc $?" >>"$O/rc.txt"
timeout 240 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
echo "grid rc $?" >>"$O/rc.txt"
timeout 50 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 --rows=16,64,256 \
  --modes=$KERNELS,bmm,auto,peer --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
echo "q rc $?" >>"$O/rc.txt"
timeout 130 python3 $S/scripts/torch_peer.py --commit="$C" --csv="$O/torch_peer.csv" \
  >"$O/torch_peer.log" 2>&1
echo "torch rc $?" >>"$O/rc.txt"
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
echo "upstream rc $?" >>"$O/rc.txt"
timeout 60 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 --modes=auto,bmm,peer >"$O/tail_bench_large.log" 2>&1
echo "large rc $?" >>"$O/rc.txt"
# The dispatched kernel (shared memory of 100 KB and more a block) against MlaValue after the
# upstream kernel, where the rule leaves MlaValue: 12-128 heads x 8-64 rows.
for k in auto split; do
  echo "# epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent, fused kernel $k" \
    >>"$O/tail_bench_upstream_kernels.csv"
  timeout 40 $S/bin/tail_bench --commit="$C" --upstream --heads=12,16,32,128 --rows=8,32,64 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 --fused_kernel=$k \
    --csv="$O/tail_bench_upstream_kernels.csv" >>"$O/tail_bench_upstream_kernels.log" 2>&1
done
echo "upstream kernels rc $?" >>"$O/rc.txt"
timeout 20 $S/bin/pdl_probe --epilogues_ns=1000 --dependent_blocks=48 --prefetch_words=16 \
  --upstream_smem=0,102400 --dependent_smem=0,17408 >"$O/pdl_probe.csv" 2>"$O/pdl_probe.err"
python3 -c "import matplotlib" 2>/dev/null && python3 $S/scripts/report.py "$O" >"$O/table.md" 2>&1
timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$O/decode_demo_61_layers.log"
for i in 1 2; do
  for b in new old; do
    if [ $b = new ]; then B=$S/bin/tail_bench; BC=$C; else B=$S/extra/tail_bench_6ea4cfb; BC=6ea4cfb; fi
    echo "# run $i $b" >>"$O/tail_bench_ws.csv"
    timeout 60 $B --commit="$BC" --csv="$O/tail_bench_ws.csv" --heads=16,32,64,96,128 \
      --rows=128,256,512,1024 --modes=fused-wgmma-ws,auto >>"$O/tail_bench_ws.log" 2>&1
    echo "ws $i $b rc $?" >>"$O/rc.txt"
  done
done
(cd "$OUT" && tar czf results.tgz ws36 && rm -rf ws36)
mkdir -p "$O"
timeout 330 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter='Heads/TileKernelTest.*/H64:Heads/TileKernelTest.*/H12:MlaGpuTest.TileKernelStridedInactiveAndRandom:GraphTileKernelTest.*' \
  >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/sanitize.out"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
cd "$OUT" && tar czf sanitize.tgz ws36/sanitize.out ws36/sanitizer_summary.txt && rm -rf ws36

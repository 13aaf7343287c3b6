#!/usr/bin/env bash
# Sixth session, eleventh and last call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/final15_x1.sh   (results under $OUT/final15)
# After 96 x 16 rows moved to the 4-stage MlaValueWgmma (the rule only; the kernels of 5b70aff): every benchmark the README
# quotes (bench4_x1.sh with the current kernels: graph_bench; the grid with every kernel forced,
# the dispatched path embedded and back to back, the BMM path and the cuBLASLt peer; the q spot
# checks; the PyTorch peer; the tail after an upstream kernel; the PDL probe; 2048 and 4096
# rows at 64 and 128 heads against the BMM path and the peer), the whole plain
# suite and the main job; and 12 x 512 rows, where the dispatched path measured 5-8% slower than
# the same kernel forced (final13, final14), with the modes in either order.
S=.gpu_stage
O=${OUT:?}/final15
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
KERNELS=fused-split,fused-wgmma-p4,fused-wgmma-a8,fused-wgmma-n128,fused-wgmma-persistent
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
for order in auto,fused-wgmma-p4 fused-wgmma-p4,auto auto,fused-wgmma-p4; do
  timeout 30 $S/bin/tail_bench --commit="$C" --csv="$O/order_12x512.csv" --heads=12 --rows=512 \
    --modes=$order >>"$O/order_12x512.log" 2>&1
done
timeout 20 $S/bin/pdl_probe --epilogues_ns=1000 --dependent_blocks=48 --prefetch_words=16 \
  --upstream_smem=0,102400 --dependent_smem=0,17408 >"$O/pdl_probe.csv" 2>"$O/pdl_probe.err"
python3 -c "import matplotlib" 2>/dev/null && python3 $S/scripts/report.py "$O" >"$O/table.md" 2>&1
timeout 100 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$O/decode_demo_61_layers.log"
cd "$OUT" && tar czf results.tgz final15

#!/usr/bin/env bash
# Eleventh session, sixth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/final56_x1.sh   (results in $OUT/results.tgz)
# The session's last code: 1e0f13e's kernels with the 8-row blocks at 9-16 rows up to 16 heads
# (rows55). The plain suite; memcheck, synccheck, initcheck and racecheck over the tests that run
# the 8-row blocks; every benchmark the README quotes and the main job (as chains53_x1.sh).
S=.gpu_stage
O=${OUT:?}/final56
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz final56); }  # after each step: a cut-off run keeps it
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
rc=$?
echo "suite rc $rc" >>"$O/rc.txt"
cp "$O/suite/summary.txt" "$O/gpu_suite_summary.txt" 2>/dev/null
[ $rc -eq 0 ] && rm -rf "$O/suite"
pack
F='MlaGpuTest.InactiveRowsAreZeroDespiteNan:MlaGpuTest.StridedViews:MlaGpuTest.RandomDataWithinOneUlp'
F=$F':MlaGpuTest.LengthsAreReadAtRunTime:ReliabilityGpuTest.InputsWrittenUpstreamUntilItsEndAreSeen'
F=$F':Paths/GraphGpuTest.ReplayEqualsEagerForEveryBucket/*:Paths/GraphGpuTest.LengthsAndPadding/*'
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter="$F" >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
rm -rf "$O/sanitize"
pack
KERNELS=fused-split,fused-wgmma-a8n32,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-ws
timeout 30 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
echo "graph_bench rc $?" >>"$O/rc.txt"
timeout 170 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
echo "grid rc $?" >>"$O/rc.txt"
pack
timeout 40 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 --rows=16,64,256 \
  --modes=$KERNELS,bmm,auto,peer --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
echo "q rc $?" >>"$O/rc.txt"
timeout 110 python3 $S/scripts/torch_peer.py --commit="$C" --csv="$O/torch_peer.csv" \
  >"$O/torch_peer.log" 2>&1
echo "torch rc $?" >>"$O/rc.txt"
pack
for e in 0 1000 2000 3000 5000; do
  echo "# epilogue $e, upstream 100 KiB shared memory a block, rewrites the latent" \
    >>"$O/tail_bench_upstream.csv"
  timeout 20 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=$e \
    --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
done
echo "# epilogue 3000, upstream without shared memory, rewrites the latent" \
  >>"$O/tail_bench_upstream.csv"
timeout 20 $S/bin/tail_bench --commit="$C" --upstream --heads=12,64 --rows=1,16 \
  --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=3000 --upstream_smem_bytes=0 \
  --csv="$O/tail_bench_upstream.csv" >>"$O/tail_bench_upstream.log" 2>&1
echo "upstream rc $?" >>"$O/rc.txt"
for k in auto split; do
  echo "# epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent, fused kernel $k" \
    >>"$O/tail_bench_upstream_kernels.csv"
  timeout 30 $S/bin/tail_bench --commit="$C" --upstream --heads=12,16,32,128 --rows=8,32,64 \
    --modes=up,up+pdl,up+nopdl --upstream_epilogue_ns=5000 --fused_kernel=$k \
    --csv="$O/tail_bench_upstream_kernels.csv" >>"$O/tail_bench_upstream_kernels.log" 2>&1
done
echo "upstream kernels rc $?" >>"$O/rc.txt"
pack
timeout 25 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 --modes=auto,bmm,peer >"$O/tail_bench_large.log" 2>&1
echo "large rc $?" >>"$O/rc.txt"
pack
timeout 15 $S/bin/pdl_probe --epilogues_ns=1000 --dependent_blocks=48 --prefetch_words=16 \
  --upstream_smem=0,102400 --dependent_smem=0,17408 >"$O/pdl_probe.csv" 2>"$O/pdl_probe.err"
python3 -c "import matplotlib" 2>/dev/null && python3 $S/scripts/report.py "$O" >"$O/table.md" 2>&1
timeout 45 $S/bin/decode_demo --layers=61 --steps=40 >"$O/decode_demo_61_layers.log" 2>&1
echo "demo rc $?" >>"$O/decode_demo_61_layers.log"
pack && rm -rf "$O"

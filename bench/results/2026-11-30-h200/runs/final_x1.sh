#!/usr/bin/env bash
# The benchmarks and the plain suite on one H200 (nvidia-h200), from the repo root after
# tools/stage_gpu.sh; used after a dispatch-rule change that needs no new sanitizer run:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/final_x1.sh   (results under $OUT/final)
# graph_bench; the tail_bench grid (every kernel forced, the dispatched path embedded and back to
# back, the cuBLASLt peer); the q spot checks; the PyTorch peer; then the whole plain suite.
S=.gpu_stage
O=${OUT:?}/final
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
KERNELS=fused-split,fused-tile64,fused-tile128,fused-wgmma-p4,fused-wgmma-k2,fused-wgmma-k4
$S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
timeout 150 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
timeout 40 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 --rows=16,64,256 \
  --modes=$KERNELS,bmm,auto,peer --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
timeout 120 python3 $S/scripts/torch_peer.py --commit="$C" --csv="$O/torch_peer.csv" \
  >"$O/torch_peer.log" 2>&1
python3 -c "import matplotlib" 2>/dev/null && python3 $S/scripts/report.py "$O" >"$O/table.md" 2>&1
timeout 200 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
cd "$OUT" && tar czf results.tgz final

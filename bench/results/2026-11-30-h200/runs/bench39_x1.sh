#!/usr/bin/env bash
# Ninth session, eighth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 230 bash bench/results/2026-11-30-h200/runs/bench39_x1.sh   (results under $OUT/bench39)
# The benchmarks the README's table is drawn from, with tail_bench now recording the bf16 matrix
# rate and each shape's FLOP time: the grid (every fused kernel forced, bmm, auto, peer,
# auto-replay), the q spot checks, PyTorch, 2048-4096 rows, and the table. The library's code is
# ws36's (59779da); its suite, sanitizers, upstream runs, graph_bench and main job stand. Few
# files: left in $OUT as they are, so that a run cut short still brings back what it wrote.
S=.gpu_stage
O=${OUT:?}/bench39
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$O/gpu.txt" 2>&1
KERNELS=fused-split,fused-wgmma-a8n32,fused-wgmma-a8,fused-wgmma-p6,fused-wgmma-p4,fused-wgmma-n128,fused-wgmma-ws
timeout 100 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
echo "grid rc $?" >>"$O/rc.txt"
timeout 25 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 --rows=16,64,256 \
  --modes=$KERNELS,bmm,auto,peer --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
echo "q rc $?" >>"$O/rc.txt"
timeout 100 python3 $S/scripts/torch_peer.py --commit="$C" --csv="$O/torch_peer.csv" \
  >"$O/torch_peer.log" 2>&1
echo "torch rc $?" >>"$O/rc.txt"
timeout 25 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench_large.csv" \
  --heads=64,128 --rows=2048,4096 --modes=auto,bmm,peer >"$O/tail_bench_large.log" 2>&1
echo "large rc $?" >>"$O/rc.txt"
python3 -c "import matplotlib" 2>/dev/null && python3 $S/scripts/report.py "$O" >"$O/table.md" 2>&1

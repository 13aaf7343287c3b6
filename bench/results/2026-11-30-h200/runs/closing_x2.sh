#!/usr/bin/env bash
# The closing run (the measured dispatch rule in place) on an nvidia-h200-x2 machine, from the
# repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/closing_x2.sh   (results under $OUT/closing)
# 1. Quiet machine, GPU 0: graph_bench; the tail_bench grid (every kernel forced, the dispatched
#    path embedded and back to back, the cuBLASLt peer); the q spot checks; the PyTorch peer.
# 2. Then at once: on GPU 1 the whole suite and the demo under the four sanitizers; on GPU 0 (and
#    both for the two-GPU test) the plain suite, then the main job (decode_demo, 61 layers).
S=.gpu_stage
O=${OUT:?}/closing
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
CUDA_VISIBLE_DEVICES=0 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 120 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=fused-split,fused-tile64,fused-tile128,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 40 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 \
  --rows=16,64,256 --modes=fused-split,fused-tile64,fused-tile128,bmm,auto,peer \
  --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 $S/scripts/torch_peer.py --commit="$C" \
  --csv="$O/torch_peer.csv" >"$O/torch_peer.log" 2>&1

CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(CUDA_VISIBLE_DEVICES=1 MLA_TAIL_REQUIRE_GPUS=1 timeout 400 $S/run.sh --out="$O/sanitize" --no-tests \
   --sanitize --sanitize-shards=8 --sanitize-jobs=20 \
   --sanitize-filter='-*DeviceMemoryExhausted*:*MultiGpu*' >"$O/sanitize.out" 2>&1) &
for tool in memcheck racecheck initcheck synccheck; do
  (CUDA_VISIBLE_DEVICES=1 timeout 300 "$CS" --tool "$tool" --print-limit 50 \
     $S/bin/decode_demo --layers=4 --steps=6 --watch_memory=false >"$O/demo.$tool.log" 2>&1
   echo "rc $?" >>"$O/demo.$tool.log") &
done
$S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
CUDA_VISIBLE_DEVICES=0 timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/demo.log" 2>&1
echo "demo rc $?" >>"$O/demo.log"
wait

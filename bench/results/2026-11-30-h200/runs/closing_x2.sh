#!/usr/bin/env bash
# The closing run (the measured dispatch rule in place) on an nvidia-h200-x2 machine, from the
# repo root after tools/stage_gpu.sh:
#   timeout 560 bash bench/results/2026-11-30-h200/runs/closing_x2.sh [soak]   (results under $OUT/closing)
# 1. Quiet machine, GPU 0: graph_bench; the tail_bench grid (every kernel forced, the dispatched
#    path embedded and back to back, the cuBLASLt peer); the q spot checks; the PyTorch peer.
# 2. Then at once: on GPU 1 the whole suite and the demo under the four sanitizers; on GPU 0 (and
#    both for the two-GPU test) the plain suite, then the main job (decode_demo, 61 layers), or
#    with `soak` the 10,000-step soak checking one layer's sampled rows a step.
# The ebb43dc run (soak, tail_bench_kernels_ebb43dc.csv) was this script with `soak`, 6 sanitizer
# shards and the demo's sanitizer runs without --watch_memory (the flag came after it).
S=.gpu_stage
O=${OUT:?}/closing
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
KERNELS=fused-split,fused-tile64,fused-tile128,fused-wgmma-p4,fused-wgmma-k2,fused-wgmma-k4
CUDA_VISIBLE_DEVICES=0 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 150 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=$KERNELS,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 40 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 \
  --rows=16,64,256 --modes=$KERNELS,bmm,auto,peer \
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
if [ "${1:-}" = soak ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 240 $S/bin/decode_demo --steps=10000 --print_every=1000 \
    --check_layers=1 >"$O/soak.log" 2>&1
  echo "soak rc $?" >>"$O/soak.log"
else
  CUDA_VISIBLE_DEVICES=0 timeout 60 $S/bin/decode_demo --layers=61 --steps=40 >"$O/demo.log" 2>&1
  echo "demo rc $?" >>"$O/demo.log"
fi
wait
cd "$OUT" && tar czf results.tgz closing

#!/usr/bin/env bash
# The closing run on an nvidia-h200-x2 machine, from the repo root after tools/stage_gpu.sh:
#   timeout 580 bash bench/results/2026-11-30-h200/runs/final_x2.sh   (results under $OUT/final)
# 1. With the machine quiet, on GPU 0: graph_bench (host costs), the tail_bench grid with every
#    fused kernel forced and the dispatched path (embedded and back-to-back), the q spot checks,
#    the PyTorch peer.
# 2. Then at once: the plain suite (GPU 0, and both GPUs for the two-GPU test) followed by the
#    10,000-step soak on GPU 0 (one layer's sampled rows checked per step); the whole suite and the
#    demo under the four sanitizers on GPU 1.
S=.gpu_stage
O=${OUT:?}/final
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
CUDA_VISIBLE_DEVICES=0 $S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 150 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --modes=fused-split,fused-tile64,fused-tile128,bmm,auto,peer,auto-replay >"$O/tail_bench.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 40 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 \
  --rows=16,64,256 --modes=fused-split,fused-tile64,fused-tile128,bmm,auto,peer \
  --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 $S/scripts/torch_peer.py --commit="$C" \
  --csv="$O/torch_peer.csv" >"$O/torch_peer.log" 2>&1

CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(CUDA_VISIBLE_DEVICES=1 MLA_TAIL_REQUIRE_GPUS=1 timeout 400 $S/run.sh --out="$O/sanitize" --no-tests \
   --sanitize --sanitize-shards=6 --sanitize-jobs=16 \
   --sanitize-filter='-*DeviceMemoryExhausted*:*MultiGpu*' >"$O/sanitize.out" 2>&1) &
for tool in memcheck racecheck initcheck synccheck; do
  (CUDA_VISIBLE_DEVICES=1 timeout 300 "$CS" --tool "$tool" --print-limit 50 \
     $S/bin/decode_demo --layers=4 --steps=6 >"$O/demo.$tool.log" 2>&1
   echo "rc $?" >>"$O/demo.$tool.log") &
done
$S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
CUDA_VISIBLE_DEVICES=0 timeout 240 $S/bin/decode_demo --steps=10000 --print_every=1000 --check_layers=1 \
  >"$O/soak.log" 2>&1
echo "soak rc $?" >>"$O/soak.log"
wait

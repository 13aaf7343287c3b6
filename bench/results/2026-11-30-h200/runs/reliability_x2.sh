#!/usr/bin/env bash
# The reliability run on an nvidia-h200-x2 machine, from the repo root after tools/stage_gpu.sh:
#   bash bench/results/2026-11-30-h200/runs/reliability_x2.sh   (results under $OUT)
# GPU 1: the whole GPU suite under the four compute-sanitizer tools, sharded and in parallel,
# without the device-filling test (the sanitizer needs device memory of its own) and the
# two-GPU test (it needs both devices). GPU 0 (and 1 for the two-GPU test): the plain suite,
# then the 10,000-step demo soak, then the demo under each sanitizer.
S=.gpu_stage
O=${OUT:?}
(CUDA_VISIBLE_DEVICES=1 MLA_TAIL_REQUIRE_GPUS=1 $S/run.sh --out="$O/sanitize" --no-tests --sanitize \
   --sanitize-shards=4 --sanitize-jobs=12 \
   --sanitize-filter='-*DeviceMemoryExhausted*:*MultiGpu*' >"$O/sanitize.out" 2>&1) &
$S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
export MLA_TAIL_REQUIRE_GPU=1
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
CUDA_VISIBLE_DEVICES=0 timeout 330 $S/bin/decode_demo --steps=10000 --print_every=500 >"$O/soak.log" 2>&1
echo "soak rc $?" >>"$O/soak.log"
for tool in memcheck racecheck initcheck synccheck; do
  (CUDA_VISIBLE_DEVICES=0 timeout 200 "$CS" --tool "$tool" --print-limit 50 \
     $S/bin/decode_demo --layers=4 --steps=6 >"$O/demo.$tool.log" 2>&1
   echo "rc $?" >>"$O/demo.$tool.log") &
done
wait
tail -n 5 "$O"/demo.*.log

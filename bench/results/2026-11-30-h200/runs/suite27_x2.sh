#!/usr/bin/env bash
# Eighth session, sixth call, on an nvidia-h200-x2 machine, from the repo root after
# tools/stage_gpu.sh (387633d) and a copy of kernel_load_gpu_test built with LoadKernel's
# cudaFuncGetAttributes taken out (what ffd2599 did) as .gpu_stage/extra/kernel_load_gpu_test_noload:
#   timeout 400 bash bench/results/2026-11-30-h200/runs/suite27_x2.sh   (results under $OUT/suite27)
# The whole plain suite with two GPUs required (the two-GPU test runs, never skips); then the
# load test without the loading, under CUDA's default lazy loading and with
# CUDA_MODULE_LOADING=EAGER, to show what the test catches and why.
S=.gpu_stage
O=${OUT:?}/suite27
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1 MLA_TAIL_REQUIRE_GPUS=2
nvidia-smi --query-gpu=name --format=csv >"$O/gpu.txt" 2>&1
timeout 200 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
timeout 60 $S/extra/kernel_load_gpu_test_noload >"$O/noload_lazy.log" 2>&1
echo "noload, lazy loading: rc $?" >>"$O/noload_lazy.log"
CUDA_MODULE_LOADING=EAGER timeout 60 $S/extra/kernel_load_gpu_test_noload >"$O/noload_eager.log" 2>&1
echo "noload, CUDA_MODULE_LOADING=EAGER: rc $?" >>"$O/noload_eager.log"
cd "$OUT" && tar czf results.tgz suite27/suite.out suite27/gpu.txt suite27/noload_lazy.log suite27/noload_eager.log && rm -rf suite27

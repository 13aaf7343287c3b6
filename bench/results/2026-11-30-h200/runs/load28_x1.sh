#!/usr/bin/env bash
# Eighth session, seventh call (one H200), from the repo root after tools/stage_gpu.sh and a copy
# of kernel_load_gpu_test built with LoadKernel's cudaFuncGetAttributes taken out (what ffd2599
# did) as .gpu_stage/extra/kernel_load_gpu_test_noload:
#   timeout 200 bash bench/results/2026-11-30-h200/runs/load28_x1.sh   (results under $OUT/load28)
# kernel_load_gpu_test (graphs on the full device, then again with memory back) three times; the
# same test without the loading, under lazy loading (expected to fail) and with
# CUDA_MODULE_LOADING=EAGER; fault_gpu_test.
S=.gpu_stage
O=${OUT:?}/load28
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
for i in 1 2 3; do
  timeout 60 $S/tests/kernel_load_gpu_test >>"$O/load.log" 2>&1
  echo "load run $i: rc $?" >>"$O/load.log"
done
timeout 60 $S/extra/kernel_load_gpu_test_noload >"$O/noload_lazy.log" 2>&1
echo "noload, lazy loading: rc $?" >>"$O/noload_lazy.log"
CUDA_MODULE_LOADING=EAGER timeout 60 $S/extra/kernel_load_gpu_test_noload >"$O/noload_eager.log" 2>&1
echo "noload, CUDA_MODULE_LOADING=EAGER: rc $?" >>"$O/noload_eager.log"
timeout 60 $S/tests/fault_gpu_test >"$O/fault.log" 2>&1
echo "fault: rc $?" >>"$O/fault.log"
cd "$OUT" && tar czf results.tgz load28 && rm -rf load28

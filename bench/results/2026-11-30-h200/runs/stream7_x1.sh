#!/usr/bin/env bash
# Fifth session, fourth call: does MlaValueStream's per-step fence.proxy.async wait for the
# worker's copies still in flight? Its configurations (MLA_TAIL_EXPERIMENT_STREAM): the latent
# from shared memory with the fence (6:0), without it (6:0:nofence, unsafe, timing only), from
# registers through ldmatrix (x:y:regs); the fused-kernel tests under 6:0:regs. One H200, from the
# repo root after tools/stage_gpu.sh:
#   timeout 570 bash bench/results/2026-11-30-h200/runs/stream7_x1.sh   (results under $OUT/stream7)
S=.gpu_stage
O=${OUT:?}/stream7
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
MLA_TAIL_EXPERIMENT_STREAM=6:0:regs timeout 100 $S/tests/mla_gpu_test \
  --gtest_filter='Heads/TileKernelTest.*:MlaGpuTest.TileKernelStridedInactiveAndRandom' \
  >"$O/mla_gpu_test_regs.log" 2>&1
echo "mla_gpu_test 6:0:regs rc $?" >>"$O/rc.txt"
for v in 6:0 6:0:nofence 6:0:regs 4:0:regs 6:1:regs; do
  echo "# MLA_TAIL_EXPERIMENT_STREAM=$v" >>"$O/tail_bench.csv"
  MLA_TAIL_EXPERIMENT_STREAM=$v timeout 60 $S/bin/tail_bench --commit="$C" \
    --csv="$O/tail_bench.csv" --heads=8,16,32,64,96,128 --rows=16,128,256,512,1024 \
    --modes=fused-stream >>"$O/tail_bench.log" 2>&1
  echo "tail_bench $v rc $?" >>"$O/rc.txt"
done
echo "# MLA_TAIL_EXPERIMENT_STREAM=peers" >>"$O/tail_bench.csv"
timeout 90 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" \
  --heads=8,16,32,64,96,128 --rows=16,128,256,512,1024 --modes=auto,peer \
  >>"$O/tail_bench.log" 2>&1
cd "$OUT" && tar czf results.tgz stream7

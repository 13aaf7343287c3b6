#!/usr/bin/env bash
# The benchmark run on one H200 (nvidia-h200), from the repo root after tools/stage_gpu.sh:
#   timeout 550 bash bench/results/2026-11-30-h200/runs/bench_x1.sh   (results under $OUT/bench)
# First the sanitizer re-runs of the fault and reliability tests and the demo under initcheck
# (fixes of the first reliability run), then, with the GPU to themselves, the benchmarks: the
# graph set's host costs, the grid (embedded and back-to-back replays, the cuBLASLt peer), the
# q spot checks, the PyTorch peer, and Nsight Compute on a few kernels.
S=.gpu_stage
O=${OUT:?}/bench
mkdir -p "$O"
C=$(sed -n 's/^commit //p' $S/MANIFEST)
export MLA_TAIL_REQUIRE_GPU=1
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests --sanitize --sanitize-shards=2 --sanitize-jobs=8 \
  --sanitize-filter='Paths/CaptureFaultTest.*:FaultGpuTest.NoBmm*:ReliabilityGpuTest.*' \
  >"$O/sanitize.out" 2>&1 &
timeout 200 "$CS" --tool initcheck --print-limit 20 $S/bin/decode_demo --layers=4 --steps=6 \
  >"$O/demo.initcheck.log" 2>&1
echo "rc $?" >>"$O/demo.initcheck.log"
wait
$S/bin/graph_bench --commit="$C" --csv="$O/graph_bench.csv" >"$O/graph_bench.log" 2>&1
timeout 300 $S/bin/tail_bench --commit="$C" --csv="$O/tail_bench.csv" >"$O/tail_bench.log" 2>&1
timeout 60 $S/bin/tail_bench --commit="$C" --q=2,4 --heads=12,64,128 --rows=16,64,256 \
  --modes=fused,bmm,auto,peer --csv="$O/tail_bench_q.csv" >"$O/tail_bench_q.log" 2>&1
timeout 150 python3 $S/scripts/torch_peer.py --commit="$C" --csv="$O/torch_peer.csv" \
  >"$O/torch_peer.log" 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for rows in 8 16 256; do
  timeout 60 "$NCU" -k regex:MlaValueKernel -c 2 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    $S/bin/tail_bench --heads=12 --rows=$rows --modes=fused --min_layers=16 --max_layers=16 \
    --replays=1 >"$O/ncu.fused.h12.r$rows.txt" 2>&1
done
timeout 60 "$NCU" -k 'regex:nvjet|MlaGate|BmmPointers' -c 3 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section LaunchStats \
  $S/bin/tail_bench --heads=128 --rows=1024 --modes=bmm --min_layers=16 --max_layers=16 \
  --replays=1 >"$O/ncu.bmm.h128.r1024.txt" 2>&1

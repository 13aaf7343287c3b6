#!/usr/bin/env bash
# Device call 1 of the tensor-parallel profile (run from the staged folder: STAGE/perf1.sh).
set -uo pipefail
S=$(cd "$(dirname "$0")" && pwd)
B=$S/bin
O=${OUT:-/tmp/perf1-out}
R=/tmp/perf1
mkdir -p "$O" "$R"
export MLA_TAIL_REQUIRE_GPU=1
C=$(sed -n 's/^commit //p' "$S/MANIFEST")
pack() { tar czf "$O/perf1.tgz" -C /tmp perf1; }
echo "== $(date -u +%T) start $C"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version --format=csv | tee "$R/gpu.txt"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; $NCU --version | tail -1
# The new kernels against ColumnSplit and the CPU reference (small shapes).
MLA_TAIL_TEST_PROFILE=sanitize timeout 50 "$S/tests/mla_gpu_test" --gtest_filter='*TileKernel*' \
  >"$R/test.txt" 2>&1; echo "== $(date -u +%T) tile tests rc $?"; grep -E "PASSED|FAILED|OK \]" "$R/test.txt" | tail -8
pack
# ncu: can it read counters?
timeout 40 $NCU --clock-control none --profile-from-start off --section SpeedOfLight \
  "$B/tail_profile" --shapes=8x64 --launches=1 --stream=false >"$R/ncu_check.txt" 2>&1
ncu_rc=$?; echo "== $(date -u +%T) ncu check rc $ncu_rc"; grep -E "Duration|DRAM Through|ERR|rror" "$R/ncu_check.txt" | head -5
$NCU --query-metrics --chip gh100 >"$R/metrics.txt" 2>&1
$NCU --list-sections >"$R/sections.txt" 2>&1
want="dram__bytes_read dram__bytes_write lts__t_sectors_srcunit_tex_op_read lts__t_sectors_srcunit_tex_op_read_lookup_hit lts__t_sectors_srcunit_tex_op_read_lookup_miss lts__t_sector_hit_rate l1tex__m_xbar2l1tex_read_bytes sm__cycles_active smsp__inst_executed_op_ldgsts smsp__inst_executed_op_global_ld sm__ctas_launched gpu__time_duration lts__t_sectors_srcunit_tex_op_write smsp__warps_active"
M=""
for m in $want; do
  if grep -q "^$m " "$R/metrics.txt"; then
    case $m in
      lts__t_sector_hit_rate) M="$M,$m.pct" ;;
      sm__cycles_active|l1tex__m_xbar2l1tex_read_bytes|sm__ctas_launched|smsp__warps_active) M="$M,$m.sum,$m.avg,$m.max,$m.min" ;;
      *) M="$M,$m.sum" ;;
    esac
  fi
done
M=${M#,}; echo "metrics: $M"
SEC=""
for s in SpeedOfLight MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables WarpStateStats SchedulerStats Occupancy LaunchStats SourceCounters InstructionStats; do
  grep -q "^$s " "$R/sections.txt" && SEC="$SEC --section $s"
done
echo "sections:$SEC"
pack
if [ $ncu_rc -eq 0 ]; then
  for spec in 8x64:Auto,Tile64x32AllStepsRegisterGate 12x32:Auto,Tile64x32AllStepsRegisterGate \
              12x512:Auto,Tile64x64Pipeline7RegisterGate 8x1024:Auto,Tile64x128Pipeline4RegisterGate; do
    shape=${spec%%:*}; kernels=${spec#*:}
    timeout 60 $NCU --clock-control none --cache-control all --profile-from-start off \
      --warp-sampling-interval 0 $SEC ${M:+--metrics $M} -f -o "$R/p_$shape" \
      "$B/tail_profile" --shapes=$shape --kernels=$kernels --launches=2 >"$R/ncu_$shape.log" 2>&1
    echo "== $(date -u +%T) ncu $shape rc $?"
    $NCU -i "$R/p_$shape.ncu-rep" --page details --csv >"$R/details_$shape.csv" 2>&1
    $NCU -i "$R/p_$shape.ncu-rep" --page raw --csv >"$R/raw_$shape.csv" 2>&1
    $NCU -i "$R/p_$shape.ncu-rep" --page source --csv --print-source sass >"$R/source_$shape.csv" 2>&1
    rm -f "$R/p_$shape.ncu-rep"
    pack
  done
fi
K=fused-LatentSplit,fused-Tile64x32AllSteps,fused-Tile64x64AllSteps,fused-Tile64x64Pipeline6
K=$K,fused-Tile64x64Pipeline4,fused-Tile64x128
RG=fused-Tile64x32AllStepsRegisterGate,fused-Tile64x64AllStepsRegisterGate
RG=$RG,fused-Tile64x64Pipeline4RegisterGate,fused-Tile64x64Pipeline6RegisterGate
RG=$RG,fused-Tile64x64Pipeline7RegisterGate,fused-Tile64x128RegisterGate
RG=$RG,fused-Tile64x128Pipeline4RegisterGate
timeout 110 "$B/tail_bench" --commit="$C" --heads=8,12,16 --rows=16,32,64,128,256,512,1024 \
  --modes=auto,$K,$RG --csv="$R/tail_bench.csv" >"$R/tail_bench.log" 2>&1
echo "== $(date -u +%T) tail_bench q1 rc $?"; pack
timeout 40 "$B/sm_ingest_probe" >"$R/sm_ingest_probe.csv" 2>&1
echo "== $(date -u +%T) sm_ingest rc $?"; pack
timeout 45 "$B/tail_bench" --commit="$C" --heads=8,12,16 --rows=16,32,64,128,256,512,1024 --q=2 \
  --modes=auto,$RG --csv="$R/tail_bench_q2.csv" >"$R/tail_bench_q2.log" 2>&1
echo "== $(date -u +%T) tail_bench q2 rc $?"; pack
awk '$4=="auto"' "$R/tail_bench.log" | head -30
ls -la "$R" "$O"

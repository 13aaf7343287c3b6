#!/usr/bin/env bash
# Fifth session, fifth call: where MlaValueStream's time goes. Nsight Compute (full set, and the
# SASS source view's stall samples) at H = 8 x 16 rows and H = 128 x 1024 rows, and its SASS.
# One H200, from the repo root after tools/stage_gpu.sh:
#   timeout 570 bash bench/results/2026-11-30-h200/runs/ncu5_x1.sh   (results under $OUT/ncu5)
S=.gpu_stage
O=${OUT:?}/ncu5
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUOBJDUMP" -sass $S/bin/tail_bench 2>/dev/null | awk '/Function : .*MlaValueStream/{p=1} /Function : /&&!/MlaValueStream/{p=0} p' \
  >"$O/stream.sass" 2>&1
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for shape in "8 16" "128 1024"; do
  set -- $shape
  timeout 120 "$NCU" -k regex:MlaValueStream -s 4 -c 1 --set full \
    $S/bin/tail_bench --heads=$1 --rows=$2 --modes=fused-stream --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.full.h$1.r$2.txt" 2>&1
  timeout 120 "$NCU" -k regex:MlaValueStream -s 4 -c 1 --section SourceCounters --page source \
    --print-source=sass --csv \
    $S/bin/tail_bench --heads=$1 --rows=$2 --modes=fused-stream --min_layers=16 \
    --max_layers=16 --replays=1 >"$O/ncu.source.h$1.r$2.csv" 2>&1
done
cd "$OUT" && tar czf results.tgz ncu5

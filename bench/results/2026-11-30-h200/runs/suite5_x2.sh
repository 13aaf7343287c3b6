#!/usr/bin/env bash
# Fifth session, closing check on an nvidia-h200-x2 machine, from the repo root after
# tools/stage_gpu.sh:   timeout 300 bash bench/results/2026-11-30-h200/runs/suite5_x2.sh
# The whole plain suite with two GPUs required (MLA_TAIL_REQUIRE_GPUS=2: the two-GPU test runs,
# never skips), on the last code.
S=.gpu_stage
O=${OUT:?}/suite5
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1 MLA_TAIL_REQUIRE_GPUS=2
timeout 200 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
echo "suite rc $?" >>"$O/suite.out"
cd "$OUT" && tar czf results.tgz suite5

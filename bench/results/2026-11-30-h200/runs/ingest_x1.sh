#!/usr/bin/env bash
# Fifth session, third call: bench/ingest_probe (shared-memory ingest a multiprocessor, by copy
# mechanism, shared-memory size, chunks in flight, grid). One H200, from the repo root after
# tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/ingest_x1.sh   (results under $OUT/ingest)
S=.gpu_stage
O=${OUT:?}/ingest
mkdir -p "$O"
timeout 200 $S/bin/ingest_probe >"$O/ingest_probe.csv" 2>"$O/ingest_probe.err"
echo "ingest_probe rc $?" >>"$O/rc.txt"
cd "$OUT" && tar czf results.tgz ingest

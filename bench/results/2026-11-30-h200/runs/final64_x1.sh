#!/usr/bin/env bash
# Twelfth session, ninth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 300 bash bench/results/2026-11-30-h200/runs/final64_x1.sh   (results in $OUT/results.tgz)
# The session's last commit (4b15737's kernels and rule; comments and the probes' output since):
# the plain suite, and the three probes as the Bazel targets build them.
S=.gpu_stage
O=${OUT:?}/final64
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz final64); }
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
rc=$?
echo "suite rc $rc" >>"$O/rc.txt"
cp "$O/suite/summary.txt" "$O/gpu_suite_summary.txt" 2>/dev/null
[ $rc -eq 0 ] && rm -rf "$O/suite"
pack
for p in timeline_probe_clean timeline_probe multicast_probe; do
  timeout 40 $S/bin/$p >"$O/$p.csv" 2>"$O/$p.err"
  echo "$p rc $?" >>"$O/rc.txt"
  pack
done
rm -rf "$O"

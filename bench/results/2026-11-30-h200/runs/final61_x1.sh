#!/usr/bin/env bash
# Twelfth session, sixth call (one H200), from the repo root after tools/stage_gpu.sh:
#   timeout 590 bash bench/results/2026-11-30-h200/runs/final61_x1.sh   (results in $OUT/results.tgz)
# The 64 x 128 tiles with two warpgroups (the session's earlier calls: runs/probes58-60.sh). The
# plain suite; the four sanitizers over the tests that force every tile kernel; the timeline
# probes; every benchmark the README quotes, the table and the main job (benchmarks.sh).
S=.gpu_stage
O=${OUT:?}/final61
mkdir -p "$O"
export MLA_TAIL_REQUIRE_GPU=1
pack() { (cd "$OUT" && tar czf results.tgz final61); }  # after each step: a cut-off run keeps it
timeout 120 $S/run.sh --out="$O/suite" >"$O/suite.out" 2>&1
rc=$?
echo "suite rc $rc" >>"$O/rc.txt"
cp "$O/suite/summary.txt" "$O/gpu_suite_summary.txt" 2>/dev/null
[ $rc -eq 0 ] && rm -rf "$O/suite"
pack
F='Heads/TileKernelTest.BitExactAndEqualToColumnSplit/H12'
F=$F':Heads/TileKernelTest.BitExactAndEqualToColumnSplit/H64'
F=$F':MlaGpuTest.TileKernelStridedInactiveAndRandom:Heads/GridTest.BothPathsBitExact/H8'
timeout 200 $S/run.sh --out="$O/sanitize" --no-tests \
  --sanitize=memcheck,synccheck,initcheck,racecheck --sanitize-shards=4 --sanitize-jobs=14 \
  --sanitize-filter="$F" >"$O/sanitize.out" 2>&1
echo "sanitize rc $?" >>"$O/rc.txt"
cp "$O/sanitize/summary.txt" "$O/sanitizer_summary.txt" 2>/dev/null
rm -rf "$O/sanitize"
pack
timeout 30 $S/bin/timeline_probe_clean >"$O/timeline_clean.csv" 2>&1
echo "timeline_clean rc $?" >>"$O/rc.txt"
timeout 30 $S/bin/timeline_probe >"$O/timeline_stamped.csv" 2>&1
echo "timeline rc $?" >>"$O/rc.txt"
pack
timeout 220 $S/benchmarks.sh --out="$O" --after='(cd "$OUT" && tar czf results.tgz final61)'
echo "benchmarks.sh rc $?" >>"$O/rc.txt"
pack && rm -rf "$O"

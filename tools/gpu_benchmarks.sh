#!/usr/bin/env bash
# Every benchmark of bench/results, on a GPU machine from the staged folder
# (tools/stage_gpu.sh copies this to STAGE_DIR/benchmarks.sh): the grid with every fused kernel
# forced, the e4m3 grid and e4m3-output comparison, the q checks, PyTorch, the tail after the
# stand-in upstream kernel (with every fused kernel forced where the dispatch rule's exceptions
# lie), the large batches, the PDL probe, the timeline probe, a multiprocessor's intake
# (sm_ingest_probe), the 64-row tiles' data movement alone beside the streaming floor
# (tile_movement_probe), the rates of e4m3 dequantization (convert_probe), graph_bench, the
# table and plot (bench/report.py), the decode demo, the consumer runtime (examples/runtime)
# checked and measured inside its own step graph, and the other consumers (a plugin loaded with
# dlopen, the CMake consumer) checked. Opt-in, on two GPUs: the consumer runtime with its heads
# split over them (--with=runtime_two_gpus).
# tail_bench checks a sample of every output it times against the CPU reference and fails on a
# mismatch. The GPU is required (MLA_TAIL_REQUIRE_GPU=1).
#
#   benchmarks.sh [--out=DIR] [--after=CMD] [--skip=STEP,...] [--with=STEP,...]
#     --out    where the CSV files, logs, table.md and rc.txt go (default $OUT, else
#              ./gpu-benchmarks): give an empty folder (the benchmarks' CSVs and the logs are
#              appended to, the probes' CSVs and table.md replaced)
#     --after  a command run after each step (e.g. packing the folder, so that a run cut off
#              keeps what it had)
#     --skip   steps not to run: graph_bench, row_count, no_gate, no_gate_embeddings, grid, fp8,
#              fp8_output, q, torch, upstream, upstream_kernels, upstream_exceptions, upstream_no_smem, large,
#              pdl_probe, timeline, sm_ingest, tile_movement, convert, demo, runtime, consumers, table
#     --with   opt-in steps to run as well: runtime_two_gpus (needs two GPUs)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/gpu-benchmarks}
after=:
skip=,
with=,
for arg in "$@"; do
  case $arg in
    --out=*) out=${arg#*=} ;;
    --after=*) after=${arg#*=} ;;
    --skip=*) skip=",${arg#*=}," ;;
    --with=*) with=",${arg#*=}," ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 0 ;;
    *) echo "benchmarks.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done
# Every step name of --skip and --with must be one: a misspelt one would run (or skip) silently.
steps=graph_bench,row_count,no_gate,no_gate_embeddings,grid,fp8,fp8_output,q,torch,upstream
steps=$steps,upstream_kernels,upstream_exceptions,upstream_no_smem,large,pdl_probe,timeline
steps=$steps,sm_ingest,tile_movement,convert,demo,runtime,consumers,table,runtime_two_gpus
for name in ${skip//,/ } ${with//,/ }; do
  case ",$steps," in *",$name,"*) ;; *) echo "benchmarks.sh: no step $name" >&2; exit 2 ;; esac
done
mkdir -p "$out"
export MLA_TAIL_REQUIRE_GPU=1
bin=$here/bin
commit=$(sed -n 's/^commit //p' "$here/MANIFEST" 2>/dev/null)
[ -n "$commit" ] || { echo "benchmarks.sh: no commit in $here/MANIFEST (run it from a stage)" >&2; exit 2; }
kernels=fused-ColumnSplit,fused-LatentSplit,fused-Tile64x32AllSteps,fused-Tile64x64AllSteps
kernels=$kernels,fused-Tile64x64Pipeline6,fused-Tile64x64Pipeline4,fused-Tile64x128
kernels=$kernels,fused-Persistent128x128
failed=0

# step NAME TIMEOUT LOG COMMAND...: runs COMMAND (a program under TIMEOUT, or a function of
# this script, whose commands have their own) with its output appended to LOG, records its exit
# status in rc.txt, then runs --after.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  case $skip in *",$name,"*) return 0 ;; esac
  case $name in runtime_two_gpus) case $with in *",$name,"*) ;; *) return 0 ;; esac ;; esac
  if [ "$(type -t "$1")" = function ]; then
    "$@" >>"$out/$log" 2>&1
  else
    timeout "$limit" "$@" >>"$out/$log" 2>&1
  fi
  local rc=$?
  echo "$name rc $rc" >>"$out/rc.txt"
  [ $rc -eq 0 ] || failed=1
  eval "$after"
}

# The tail after the stand-in upstream kernel (132 blocks; 100 KB of shared memory a block unless
# said otherwise; it rewrites the tail's latent after its trigger), one CSV section per setting.
upstream() {
  local file=$1 title=$2
  shift 2
  echo "# $title" >>"$out/$file.csv"
  timeout 30 "$bin/tail_bench" --commit="$commit" --upstream \
    --upstream_modes=up,up+pdl,up+nopdl \
    --csv="$out/$file.csv" "$@" >>"$out/$file.log" 2>&1
}

nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.txt" 2>&1
step graph_bench 30 graph_bench.log "$bin/graph_bench" --commit="$commit" \
  --csv="$out/graph_bench.csv"
# The live row count: counted, padded and exact tails at 12 and 64 heads, buckets 16 and 64, with
# and without a gate; the host time of Run, SetLayer and Update with cached and full pointer
# checks, and of Update's parts (validation, error scope and device guard, pointer checks, CUDA's
# node update).
step row_count 90 row_count_bench.log "$bin/row_count_bench" --commit="$commit" \
  --csv="$out/row_count_bench.csv"
step row_count 90 row_count_bench.log "$bin/row_count_bench" --commit="$commit" \
  --csv="$out/row_count_bench.csv" --gate=false --host_calls=1000
# The tail without a gate over the grid, every fused kernel forced, and the rule's choice gated
# and ungated alternated three times in one process (the same kernels, the same layers).
nogate_kernels=${kernels//fused-/nogate-fused-}
step no_gate 240 tail_bench_no_gate.log "$bin/tail_bench" --commit="$commit" \
  --csv="$out/tail_bench_no_gate.csv" \
  --modes=$nogate_kernels,auto,nogate-auto,auto,nogate-auto,auto,nogate-auto
# The same comparison where the tails run in other embeddings, at 8-128 heads x 1-16 rows: back to
# back without PDL, and after the stand-in upstream kernel (100 KiB of shared memory a block, and
# none), gated and ungated alternated three times each.
no_gate_embeddings() {
  local f=$out/tail_bench_no_gate_embeddings.csv shapes="--heads=8,12,16,64,96,128 --rows=1,2,4,8,16"
  local alt=auto,nogate-auto,auto,nogate-auto,auto,nogate-auto
  local up=up+pdl,nogate-up+pdl,up+pdl,nogate-up+pdl,up+pdl,nogate-up+pdl,up
  echo "# back to back without PDL" >>"$f"
  timeout 60 "$bin/tail_bench" --commit="$commit" $shapes --modes=$alt --pdl=false --csv="$f" ||
    return 1
  echo "# after the upstream kernel, 100 KiB of shared memory a block" >>"$f"
  timeout 60 "$bin/tail_bench" --commit="$commit" $shapes --upstream --upstream_modes=$up \
    --csv="$f" || return 1
  echo "# after the upstream kernel without shared memory" >>"$f"
  timeout 60 "$bin/tail_bench" --commit="$commit" $shapes --upstream --upstream_modes=$up \
    --upstream_smem_bytes=0 --csv="$f"
}
step no_gate_embeddings 200 tail_bench_no_gate_embeddings.log no_gate_embeddings
step grid 240 tail_bench.log "$bin/tail_bench" --commit="$commit" --csv="$out/tail_bench.csv" \
  --modes=$kernels,bmm,auto,peer,auto-replay
# e4m3 W_UV on the grid (every kernel forced, and the rule), and the e4m3 output beside the
# unfused pair with every kernel forced on it (bf16 and e4m3 W_UV), each against the bf16 tail
# (auto) of the same run.
fp8_kernels=${kernels//fused-/fp8w-fused-}
step fp8 300 tail_bench_fp8.log "$bin/tail_bench" --commit="$commit" \
  --csv="$out/tail_bench_fp8.csv" --modes=auto,fp8w-auto,$fp8_kernels
step fp8_output 420 tail_bench_fp8_output.log "$bin/tail_bench" --commit="$commit" \
  --csv="$out/tail_bench_fp8_output.csv" \
  --modes=auto,fp8o-auto,fp8o-pair,fp8w-fp8o-auto,fp8w-fp8o-pair,${kernels//fused-/fp8o-fused-},${kernels//fused-/fp8w-fp8o-fused-}
step q 40 tail_bench_q.log "$bin/tail_bench" --commit="$commit" --q=2,4 --heads=12,64,128 \
  --rows=16,64,256 --modes=$kernels,bmm,auto,peer --csv="$out/tail_bench_q.csv"
step torch 110 torch_peer.log python3 "$here/scripts/torch_peer.py" --commit="$commit" \
  --csv="$out/torch_peer.csv"
upstream_windows() {
  local e rc=0
  for e in 0 1000 2000 3000 5000; do
    upstream tail_bench_upstream \
      "epilogue $e, upstream 100 KiB shared memory a block, rewrites the latent" \
      --heads=12,64 --rows=1,16 --upstream_epilogue_ns=$e || rc=1
  done
  upstream tail_bench_upstream \
    "epilogue 3000, upstream without shared memory, rewrites the latent" \
    --heads=12,64 --rows=1,16 --upstream_epilogue_ns=3000 --upstream_smem_bytes=0 || rc=1
  return $rc
}
step upstream - tail_bench_upstream.log upstream_windows
upstream_kernels() {
  local k rc=0
  local title="epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent"
  for k in auto ColumnSplit; do
    upstream tail_bench_upstream_kernels "$title, fused kernel $k" \
      --heads=12,16,32,128 --rows=8,32,64 --upstream_epilogue_ns=5000 --fused_kernel=$k || rc=1
  done
  return $rc
}
step upstream_kernels - tail_bench_upstream_kernels.log upstream_kernels
# The dispatch rule's exceptions (docs/design.md) decided from one run: after the same upstream
# kernel (5 us window), every fused kernel forced, and the rule's own choice, at 32-128 heads x
# 1-16 rows, LatentSplit at 32-64 heads among them, with PDL and without. bench/report.py
# --exceptions prints the table.
upstream_exceptions() {
  local k heads rc=0
  local title="epilogue 5000, upstream 100 KiB shared memory a block, rewrites the latent"
  for k in auto ColumnSplit LatentSplit Tile64x32AllSteps Tile64x64AllSteps Tile64x64Pipeline6 \
      Tile64x64Pipeline4 Tile64x128 Persistent128x128; do
    for heads in 32,48 64,96 128; do
      echo "# $title, fused kernel $k" >>"$out/tail_bench_upstream_exceptions.csv"
      timeout 60 "$bin/tail_bench" --commit="$commit" --upstream \
        --upstream_modes=up,up+pdl,up+nopdl --csv="$out/tail_bench_upstream_exceptions.csv" \
        --heads=$heads --rows=1,2,4,8,16 \
        --upstream_epilogue_ns=5000 --fused_kernel=$k >>"$out/tail_bench_upstream_exceptions.log" \
        2>&1 || rc=1
    done
  done
  return $rc
}
step upstream_exceptions - tail_bench_upstream_exceptions.log upstream_exceptions
# LatentSplit against ColumnSplit past one wave (32-64 heads x 1-8 rows) behind an upstream
# kernel that holds no shared memory, with a short window and a long one.
upstream_no_smem() {
  local k e rc=0
  for e in 1000 5000; do
    for k in auto ColumnSplit LatentSplit; do
      upstream tail_bench_upstream_no_smem \
        "epilogue $e, upstream without shared memory, rewrites the latent, fused kernel $k" \
        --heads=32,64 --rows=1,2,4,8 --upstream_epilogue_ns=$e --upstream_smem_bytes=0 \
        --fused_kernel=$k || rc=1
    done
  done
  return $rc
}
step upstream_no_smem - tail_bench_upstream_no_smem.log upstream_no_smem
step large 45 tail_bench_large.log "$bin/tail_bench" --commit="$commit" \
  --csv="$out/tail_bench_large.csv" --heads=64,128 --rows=2048,4096 --modes=auto,bmm,peer
pdl_probe() {
  timeout 15 "$bin/pdl_probe" --epilogues_ns=1000 --dependent_blocks=48 --prefetch_words=16 \
    --upstream_smem=0,102400 --dependent_smem=0,17408 >"$out/pdl_probe.csv"
}
step pdl_probe - pdl_probe.err pdl_probe
# Where the dispatched kernel's blocks spend their time at 8-16 heads, stamped and unstamped.
timeline() {
  timeout 60 "$bin/timeline_probe" >"$out/timeline_probe.csv" &&
    timeout 60 "$bin/timeline_probe_clean" >"$out/timeline_probe_clean.csv"
}
step timeline - timeline_probe.err timeline
sm_ingest() { timeout 30 "$bin/sm_ingest_probe" >"$out/sm_ingest_probe.csv"; }
step sm_ingest - sm_ingest_probe.err sm_ingest
tile_movement() { timeout 120 "$bin/tile_movement_probe" >"$out/tile_movement_probe.csv"; }
step tile_movement - tile_movement_probe.err tile_movement
convert() { timeout 30 "$bin/convert_probe" >"$out/convert_probe.csv"; }
step convert - convert_probe.err convert
table() { python3 "$here/scripts/report.py" "$out" >"$out/table.md"; }
step table - table.err table
step demo 45 decode_demo_61_layers.log "$bin/decode_demo" --layers=61 --steps=40
# The consumer runtime: 61 layers a step graph of its own, pointers and lengths changed every
# step; checked against its CPU reference, then what the tail adds per layer with and without
# the PDL edge, and the host time of a layer's update.
runtime() {
  timeout 60 "$bin/example_runtime" --heads=12,64 --buckets=1,16,64 --check &&
    timeout 120 "$bin/example_runtime" --heads=12,64 --buckets=1,16,64 --measure \
      --csv="$out/runtime_embedding.csv"
}
step runtime - runtime_embedding.log runtime
# Opt-in (--with=runtime_two_gpus): the same model with its heads split over two GPUs, as tensor
# parallelism splits them (24 and 128 heads: 12 and 64 a device), one thread a device; each
# device's slice checked against the model's heads it serves, then each device's step timed while
# the other runs its own. Two GPUs are required (fewer fail the step).
runtime_two_gpus() {
  MLA_TAIL_REQUIRE_GPUS=2 timeout 60 "$bin/example_runtime" --devices=0,1 --heads=24,128 \
    --buckets=1,16,64 --check &&
    MLA_TAIL_REQUIRE_GPUS=2 timeout 120 "$bin/example_runtime" --devices=0,1 --heads=24,128 \
      --buckets=1,16,64 --measure --csv="$out/runtime_two_gpus.csv"
}
step runtime_two_gpus - runtime_two_gpus.log runtime_two_gpus
# The consumers (tools/build_consumers.sh): the shared-library plugin loaded by its host with
# dlopen, and the CMake consumer, each checked against its CPU reference; the Abseil libraries
# they need are staged beside them.
consumers() {
  timeout 60 "$here/consumers/plugin_host" "$here/consumers/libtail_plugin.so" &&
    timeout 60 "$here/consumers/cmake_consumer"
}
step consumers - consumers.log consumers
echo "benchmarks.sh: results in $out ($( [ $failed -eq 0 ] && echo all steps passed || \
  echo some steps FAILED, see rc.txt))"
exit $failed

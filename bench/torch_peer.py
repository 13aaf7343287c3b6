#!/usr/bin/env python3
"""The PyTorch peer of the MLA attention tail, timed on the GPU.

Measures what serving engines run today (vLLM, Kimi-K3): per layer
    v   = torch.bmm(latent.transpose(0, 1), w_uv)                  # [H, B, 128]
    out = v.transpose(0, 1).reshape(B, H*128) * gate.sigmoid()    # torch.compile'd
with latent bf16 [B, H, 512], w_uv the absorbed view of a [H, 128, 512] tensor (strides
(65536, 1, 512)), gate and out bf16 [B, H*128], q = 1. L layers of distinct tensors (enough to
move 180 MiB, 16..256 of them) keep L2 cold; all L tails are captured into one CUDA graph and
the median of 20 timed replays, divided by L, is the time per layer.

Run (PyTorch with CUDA and Triton, a GPU):
    python3 bench/torch_peer.py --csv results.csv
Options: --heads, --rows (comma lists), --commit TEXT, --no-compile-dynamic.
The default compiles the gate once with dynamic=True (about 40 s for all 77 shapes on an H200).
--no-compile-dynamic compiles it per shape (about 70 s with warm compile caches) and gives a
faster peer at large rows: H=64 B=1024 44 against 71 us/layer, H=128 B=1024 85 against 137
(H200, torch 2.11); making only rows dynamic, heads static, gave about the dynamic numbers.
Prints one line per shape and appends heads,rows,q,mode,layers,us_per_layer to the CSV; mode is
"torch", or "torch_eager_gate" where compiling the gate failed. Exits 1 if any shape failed.
"""

import argparse
import datetime
import gc
import math
import os
import statistics
import sys

import torch

LATENT = 512
VALUE = 128
COLD_BYTES = 180 << 20  # three L2s, as bench_util.cc's LayersForColdL2
MIN_LAYERS, MAX_LAYERS = 16, 256
WARMUP_REPLAYS, TIMED_REPLAYS = 3, 20
CSV_HEADER = "heads,rows,q,mode,layers,us_per_layer"


def gate_tail(v, gate, out):
    # Written into `out` inside the compiled graph, so Inductor stores straight into it.
    rows = gate.shape[0]
    out.copy_(v.transpose(0, 1).reshape(rows, -1) * gate.sigmoid())


def compile_gate(dynamic):
    return torch.compile(gate_tail, fullgraph=True, dynamic=dynamic)


def layers_for(heads, rows):
    per_layer = 2 * (heads * VALUE * LATENT + rows * heads * LATENT + 2 * rows * heads * VALUE)
    return max(MIN_LAYERS, min(MAX_LAYERS, math.ceil(COLD_BYTES / per_layer)))


def bench_shape(heads, rows, state):
    """Returns (mode, layers, us_per_layer) for one shape."""
    dev = "cuda"
    bf16 = torch.bfloat16
    n = layers_for(heads, rows)
    # Separate allocations per layer (not slices of one buffer): distinct, offset-free tensors.
    latents = [torch.randn(rows, heads, LATENT, device=dev, dtype=bf16).mul_(0.5) for _ in range(n)]
    w_uvs = [torch.randn(heads, VALUE, LATENT, device=dev, dtype=bf16).mul_(0.5).transpose(1, 2)
             for _ in range(n)]
    gates = [torch.randn(rows, heads * VALUE, device=dev, dtype=bf16).mul_(2.0) for _ in range(n)]
    outs = [torch.empty(rows, heads * VALUE, device=dev, dtype=bf16) for _ in range(n)]

    # Compile (lazily, on the first call) outside any capture; fall back to eager on failure.
    mode, gate_fn = "torch", None
    if not state["compile_broken"]:
        gate_fn = state["compiled"] or compile_gate(False)
        v0 = torch.bmm(latents[0].transpose(0, 1), w_uvs[0])
        try:
            gate_fn(v0, gates[0], outs[0])
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - any compiler failure means eager
            print(f"heads {heads} rows {rows}: torch.compile failed, eager gate: "
                  f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                  file=sys.stderr, flush=True)
            # A shared compiled function that failed once is not retried.
            state["compile_broken"] = state["compiled"] is not None
            gate_fn = None
    if gate_fn is None:
        mode, gate_fn = "torch_eager_gate", gate_tail

    def run_layers():
        for i in range(n):
            v = torch.bmm(latents[i].transpose(0, 1), w_uvs[i])
            gate_fn(v, gates[i], outs[i])

    # Warm-up on a side stream before capture, as torch.cuda.graph requires; capture on it too.
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            run_layers()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        run_layers()

    # NaN outputs before the replays, so the check below proves the graph wrote them.
    for o in outs:
        o.fill_(float("nan"))
    for _ in range(WARMUP_REPLAYS):
        graph.replay()
    cur = torch.cuda.current_stream()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(TIMED_REPLAYS)]
    for start, end in events:
        start.record(cur)
        graph.replay()
        end.record(cur)
    torch.cuda.synchronize()
    median_ms = statistics.median(s.elapsed_time(e) for s, e in events)

    for i in (0, n - 1):
        v = torch.bmm(latents[i].transpose(0, 1), w_uvs[i])
        ref = (v.transpose(0, 1).reshape(rows, -1).float() * gates[i].float().sigmoid()).to(bf16)
        torch.testing.assert_close(outs[i], ref, rtol=2e-2, atol=1e-3,
                                   msg=lambda m: f"layer {i} output wrong after replay: {m}")
    del graph
    return mode, n, median_ms * 1000.0 / n


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int_list, default=int_list("8,12,16,32,64,96,128"))
    parser.add_argument("--rows", type=int_list,
                        default=int_list("1,2,4,8,16,32,64,128,256,512,1024"))
    parser.add_argument("--csv", default="", help="append result rows to this CSV file")
    parser.add_argument("--commit", default="", help="recorded in the comment line")
    parser.add_argument("--compile-dynamic", action=argparse.BooleanOptionalAction, default=True,
                        help="compile the gate once with dynamic=True (default) instead of per shape")
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("torch_peer: no CUDA GPU available", file=sys.stderr, flush=True)
        return 1

    # Per-shape compiles add one cache entry each; keep Dynamo from falling back to eager.
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit",
                 "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 4096)

    compile_mode = "dynamic" if args.compile_dynamic else "per shape"
    run_line = (f"# torch_peer  commit {args.commit or '?'}  torch {torch.__version__} "
                f"(CUDA {torch.version.cuda})  {torch.cuda.get_device_name()}  "
                f"{datetime.datetime.now().isoformat(timespec='seconds')}  "
                f"compile {compile_mode}")
    print(run_line, flush=True)
    print(f"{'heads':>5} {'rows':>5} {'q':>2} {'mode':>16} {'layers':>6} {'us/layer':>10}",
          flush=True)

    if args.csv:
        # The run's commit, device and date above its rows, as the C++ benchmarks write theirs.
        new_file = not os.path.exists(args.csv) or os.path.getsize(args.csv) == 0
        with open(args.csv, "a") as f:
            f.write(run_line + "\n" + (CSV_HEADER + "\n" if new_file else ""))

    state = {"compile_broken": False,
             "compiled": compile_gate(True) if args.compile_dynamic else None}
    failed = 0
    for heads in args.heads:
        for rows in args.rows:
            try:
                mode, layers, us = bench_shape(heads, rows, state)
            except Exception as e:  # noqa: BLE001 - report and go on to the next shape
                failed += 1
                print(f"heads {heads} rows {rows}: {type(e).__name__}: {e}",
                      file=sys.stderr, flush=True)
            else:
                print(f"{heads:5d} {rows:5d} {1:2d} {mode:>16} {layers:6d} {us:10.2f}", flush=True)
                if args.csv:
                    with open(args.csv, "a") as f:
                        f.write(f"{heads},{rows},1,{mode},{layers},{us:.3f}\n")
            # Tensors and the graph's pool die with bench_shape's frame; hand memory back.
            gc.collect()
            try:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - a broken context fails the next shapes
                print(f"cleanup: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    if failed:
        print(f"torch_peer: {failed} shape(s) failed", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The README's benchmark table and efficiency plot, drawn from a results folder.

    python3 bench/report.py bench/results/2026-11-30-h200      # prints the markdown table
                                                                # and writes efficiency.png there

Reads tail_bench.csv (our paths, the limit, the cuBLASLt + gate peer) and torch_peer.csv (the
PyTorch formulation). The plot needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import os
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.reader(f):
            if not r or r[0].startswith("#") or r[0] == "heads":
                continue
            rows[(int(r[0]), int(r[1]), int(r[2]), r[3])] = [float(x) for x in r[4:]]
    return rows


def main(folder):
    ours = load(os.path.join(folder, "tail_bench.csv"))
    torch = load(os.path.join(folder, "torch_peer.csv"))
    shapes = sorted({(h, b) for h, b, q, m in ours if m == "auto" and q == 1})
    print("| heads | rows | ours, dispatched (µs) | fused / bmm (µs) | limit (µs) | efficiency | "
          "PyTorch (µs) | cuBLASLt+gate (µs) | vs PyTorch | vs cuBLASLt+gate |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for h, b in shapes:
        _, us, limit, _ = ours[(h, b, 1, "auto")]
        fused, bmm = ours[(h, b, 1, "fused")][1], ours[(h, b, 1, "bmm")][1]
        peer = ours[(h, b, 1, "peer")][1]
        pt = torch.get((h, b, 1, "torch"), [0, float("nan")])[1]
        print(f"| {h} | {b} | {us:.2f} | {fused:.2f} / {bmm:.2f} | {limit:.2f} | {100 * limit / us:.0f}% | "
              f"{pt:.2f} | {peer:.2f} | {pt / us:.2f}× | {peer / us:.2f}× |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for h in sorted({h for h, _ in shapes}):
        bs = [b for hh, b in shapes if hh == h]
        eff = [100 * ours[(h, b, 1, "auto")][2] / ours[(h, b, 1, "auto")][1] for b in bs]
        ax.plot(bs, eff, marker="o", label=f"H = {h}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rows (tokens), q = 1")
    ax.set_ylabel("efficiency: byte-time limit / measured (%)")
    ax.set_title("mla-tail on an H200, per layer, cold L2, dispatched path")
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "efficiency.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results/2026-11-30-h200")

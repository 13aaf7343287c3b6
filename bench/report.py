#!/usr/bin/env python3
"""The full benchmark table (table.md) and the efficiency plot, drawn from a results folder.

    python3 bench/report.py bench/results/h200                  # prints the markdown table
                                                                # and writes efficiency.svg there
    python3 bench/report.py bench/results/h200 --out /tmp/plot  # the plot elsewhere

Reads tail_bench.csv (our paths, the limit, the cuBLASLt + gate peer) and torch_peer.csv (the
PyTorch formulation), and tail_bench_fp8.csv and tail_bench_fp8_output.csv when present (e4m3
W_UV, and the e4m3 output, against the bf16 tail of the same run, and over the streaming floor of
their own bytes: print_fp8). Per
shape: the dispatched path, the fastest of the kernels the run forced (every fused kernel and bmm,
as the run forced them), the back-to-back replays (auto-replay rows, when present), the limit
(the bytes' time), the FLOPs' time at the run's bf16 matrix rate (when the run recorded it), the
bound max(limit / 0.8, limit + 1 us) (printed as "bound") and the streaming floor of the same
bytes with the dispatched time over it (when the run measured it: bench/stream_floor.h), then a
line counting the shapes within that bound, within 1.15x the floor, at least 2x faster than
PyTorch, and dispatched within 3% of the fastest kernel.
With tail_bench_no_gate.csv in the folder: the tail without a gate against the gated one, each
the median of the runs alternated in that file (auto and nogate-auto), per shape, and the
no-gate rule against the fastest forced kernel without a gate (print_no_gate).
With tail_bench_upstream_exceptions.csv in the folder (benchmarks.sh's upstream_exceptions step),
or alone with --exceptions: the tail's added time after the stand-in upstream kernel with every
fused kernel forced, and the rule's choice, at the shapes of the dispatch rule's exceptions.
The plot is SVG (efficiency.svg), written without a plotting library.
"""
import argparse
import csv
import math
import os
import sys


def is_kernel_mode(mode):
    """A mode that forces a path or kernel, embedded: fused, fused-<kernel>, bmm."""
    return (mode in ("fused", "bmm") or mode.startswith("fused-")) and not mode.endswith("-replay")


def number_or_text(cell):
    """A CSV cell as a float, None where empty, or its text (stream_floor_block: "512x4")."""
    if not cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return cell


def records(path):
    """Each data row of a tail_bench CSV as (section, (heads, rows, q, mode), {column: float or
    None}), by each section's own header line (the CSVs are appended to, one header per run, and
    newer runs add columns at the end); section is the last "# ..." line that is not a run's
    "# commit ..." header, or None."""
    header, section = None, None
    with open(path) as f:
        for r in csv.reader(f):
            if not r:
                continue
            if r[0].startswith("#"):
                if not r[0].startswith("# commit"):
                    section = ",".join(r)[2:]
                continue
            if r[0] == "heads":
                header = r
                continue
            values = {k: number_or_text(v) for k, v in zip(header[4:], r[4:])}
            yield section, (int(r[0]), int(r[1]), int(r[2]), r[3]), values


def load(path):
    """{(heads, rows, q, mode): {column: float or None}}: a mode's last run."""
    return {key: values for _, key, values in records(path)}

def floor_cell(ours, h, b, q, mode="auto"):
    """The shape's time over its streaming floor, or – where the run did not measure the floor."""
    row = ours.get((h, b, q, mode), {})
    floor = row.get("stream_floor_us")
    return f"{row['us_per_layer'] / floor:.2f}" if floor else "–"


EXCEPTION_KERNELS = ("auto", "ColumnSplit", "LatentSplit", "Tile64x32AllSteps",
                     "Tile64x64AllSteps", "Tile64x64Pipeline6", "Tile64x64Pipeline4", "Tile64x128",
                     "Persistent128x128")


def load_by_kernel(path):
    """{(kernel, heads, rows, mode): us_per_layer} from a CSV whose sections each start with a
    "# ..., fused kernel K" line (tail_bench --upstream runs, one per forced kernel)."""
    return {(section.rsplit("fused kernel ", 1)[1].strip(), h, b, mode): values["us_per_layer"]
            for section, (h, b, _, mode), values in records(path)}


def print_exceptions(path):
    """The added time (tail + upstream - upstream alone) of every kernel at each shape, with PDL
    and without, the fastest kernel, and the rule's choice (auto) against it."""
    runs = load_by_kernel(path)
    shapes = sorted({(h, b) for _, h, b, m in runs})
    kernels = [k for k in EXCEPTION_KERNELS if any(key[0] == k for key in runs)]

    def added(kernel, h, b, mode):
        tail, alone = runs.get((kernel, h, b, mode)), runs.get((kernel, h, b, "up"))
        return None if tail is None or alone is None else tail - alone

    for mode, title in (("up+pdl", "with PDL"), ("up+nopdl", "without PDL")):
        print(f"**Added time after the upstream kernel, {title} (µs); fastest in bold:**\n")
        print("| heads | rows | " + " | ".join(kernels) + " | fastest | rule / fastest |")
        print("|---:|---:|" + "---:|" * len(kernels) + "---|---:|")
        for h, b in shapes:
            times = {k: added(k, h, b, mode) for k in kernels}
            forced = {k: t for k, t in times.items() if t is not None and k != "auto"}
            if not forced:
                continue
            fastest = min(forced, key=forced.get)
            cells = []
            for k in kernels:
                t = times[k]
                cell = "–" if t is None else f"{t:.2f}"
                cells.append(f"**{cell}**" if k == fastest else cell)
            rule = times.get("auto")
            ratio = f"{rule / forced[fastest]:.2f}" if rule is not None and forced[fastest] > 0 \
                else "–"
            print(f"| {h} | {b} | " + " | ".join(cells) + f" | {fastest} | {ratio} |")
        print()


def print_grids(ours, torch, shapes):
    heads = sorted({h for h, _ in shapes})
    rows = sorted({b for _, b in shapes})
    us = lambda h, b: ours[(h, b, 1, "auto")]["us_per_layer"]
    cells = {
        "Time (µs)": lambda h, b: f"{us(h, b):.2f}",
        "Efficiency (limit / time)":
            lambda h, b: f"{100 * ours[(h, b, 1, 'auto')]['limit_us'] / us(h, b):.0f}%",
        "Against PyTorch (its time / ours)":
            lambda h, b: f"{torch[(h, b, 1, 'torch')]['us_per_layer'] / us(h, b):.2f}×",
        "Against cuBLASLt + gate (its time / ours)":
            lambda h, b: f"{ours[(h, b, 1, 'peer')]['us_per_layer'] / us(h, b):.2f}×",
        "Against the streaming floor (time / floor)": lambda h, b: floor_cell(ours, h, b, 1),
    }
    for title, cell in cells.items():
        print(f"**{title}:**\n")
        print("| rows \\ heads | " + " | ".join(str(h) for h in heads) + " |")
        print("|---:|" + "---:|" * len(heads))
        for b in rows:
            print(f"| {b} | " + " | ".join(cell(h, b) for h in heads) + " |")
        print()


def load_runs(path):
    """{(heads, rows, q, mode): [us_per_layer, ...]}: every run of a mode, where load keeps the
    last (a CSV may hold a mode several times, alternated with another)."""
    runs = {}
    for _, key, values in records(path):
        runs.setdefault(key, []).append(values["us_per_layer"])
    return runs

def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def print_no_gate(folder):
    """From tail_bench_no_gate.csv: the dispatched tail without a gate over the gated one (the
    median of each mode's alternated runs in that one process) as a rows x heads grid, the shapes
    where it is slower, and the no-gate rule against the fastest kernel forced without a gate."""
    path = os.path.join(folder, "tail_bench_no_gate.csv")
    if not os.path.exists(path):
        return
    runs = load_runs(path)
    shapes = sorted({(h, b) for h, b, q, m in runs
                     if q == 1 and m == "nogate-auto" and (h, b, 1, "auto") in runs})
    if not shapes:
        return
    heads = sorted({h for h, _ in shapes})
    ratio = {(h, b): median(runs[(h, b, 1, "nogate-auto")]) / median(runs[(h, b, 1, "auto")])
             for h, b in shapes}
    counts = {len(runs[(h, b, 1, m)]) for h, b in shapes for m in ("auto", "nogate-auto")}
    print(f"\n**Without a gate over gated (the dispatched tails, medians of {max(counts)} "
          "alternated runs each):**\n")
    print("| rows \\ heads | " + " | ".join(str(h) for h in heads) + " |")
    print("|---:|" + "---:|" * len(heads))
    for b in sorted({b for _, b in shapes}):
        print(f"| {b} | " + " | ".join(f"{ratio[(h, b)]:.2f}×" if (h, b) in ratio else "–"
                                       for h in heads) + " |")
    slower = [(h, b) for h, b in shapes if ratio[(h, b)] > 1.0]
    values = sorted(ratio.values())
    print(f"\nWithout a gate: {values[0]:.2f}-{values[-1]:.2f}× the gated tail (median "
          f"{median(values):.2f}×); slower at {len(slower)} of {len(shapes)} shapes" +
          (": " + ", ".join(f"{h} × {b} ({ratio[(h, b)]:.3f}×)" for h, b in slower)
           if slower else "") + ".")
    within = 0
    for h, b in shapes:
        forced = [median(v) for (hh, bb, q, m), v in runs.items()
                  if (hh, bb, q) == (h, b, 1) and m.startswith("nogate-fused-")]
        within += bool(forced) and median(runs[(h, b, 1, "nogate-auto")]) <= 1.03 * min(forced)
    print(f"The rule's kernel without a gate is within 3% of the fastest kernel forced without a "
          f"gate at {within} of {len(shapes)} shapes.")
    print_no_gate_embeddings(os.path.join(folder, "tail_bench_no_gate_embeddings.csv"))


def print_no_gate_embeddings(path):
    """From tail_bench_no_gate_embeddings.csv (sections: back to back without PDL; after the
    upstream kernel with and without shared memory): without a gate over gated per shape, the
    medians of the alternated runs; after the upstream kernel, of the time each adds to it."""
    if not os.path.exists(path):
        return
    sections = {}
    for title, (h, b, _, mode), values in records(path):
        sections.setdefault(title, {}).setdefault((h, b, mode), []).append(
            values["us_per_layer"])
    for title, runs in sections.items():
        shapes = sorted({(h, b) for h, b, _ in runs})
        upstream = any(m == "up" for _, _, m in runs)
        gated, ungated = ("up+pdl", "nogate-up+pdl") if upstream else ("auto", "nogate-auto")
        cells = []
        for h, b in shapes:
            if any((h, b, m) not in runs for m in ([gated, ungated] + (["up"] if upstream else []))):
                cells.append(f"{h} × {b} –")  # a mode without a checked row
                continue
            base = median(runs[(h, b, "up")]) if upstream else 0.0
            g = median(runs[(h, b, gated)]) - base
            n = median(runs[(h, b, ungated)]) - base
            cells.append(f"{h} × {b} {n / g:.3f}×{' (slower)' if n > g else ''}")
        print(f"\nWithout a gate over gated, {title}"
              f"{' (the time each adds to the upstream kernel)' if upstream else ''}: " +
              "; ".join(cells) + ".")


def print_fp8(folder):
    """The e4m3 tables: from tail_bench_fp8.csv, e4m3 W_UV against the bf16 tail of the same run
    per shape (the goals: <= 0.65x at 64-128 heads x 1-16 rows, <= 0.80x at 32-64 rows, no shape
    slower); from tail_bench_fp8_output.csv, the e4m3 output against the bf16-output tail of its
    run (+0.2 us at most) and the unfused pair (faster)."""
    path = os.path.join(folder, "tail_bench_fp8.csv")
    if not os.path.exists(path):
        return
    fp8 = load(path)
    shapes = sorted({(h, b) for h, b, q, m in fp8 if m == "auto" and q == 1})
    kernels = sorted({m for _, _, q, m in fp8 if q == 1 and m.startswith("fp8w-fused-")})

    def us(h, b, mode):
        row = fp8.get((h, b, 1, mode))
        return row["us_per_layer"] if row else None

    def goal(h, b):
        if 64 <= h <= 128 and b <= 16:
            return 0.65
        if 64 <= h <= 128 and 32 <= b <= 64:
            return 0.80
        return 1.0

    print("\n**e4m3 W_UV against the bf16 tail of the same run (dispatched paths):**\n")
    print("| heads | rows | bf16 (µs) | e4m3 W_UV (µs) | ratio | goal | fastest e4m3 kernel (µs) "
          "| e4m3 limit (µs) | e4m3 time / floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    met = 0
    for h, b in shapes:
        bf16, e4m3 = us(h, b, "auto"), us(h, b, "fp8w-auto")
        if bf16 is None or e4m3 is None:
            continue
        forced = {m: us(h, b, m) for m in kernels if us(h, b, m) is not None}
        fastest = min(forced, key=forced.get) if forced else None
        fastest_cell = (f"{forced[fastest]:.2f} {fastest[len('fp8w-fused-'):]}"
                        if fastest else "–")
        ratio = e4m3 / bf16
        ok = ratio <= goal(h, b)
        met += ok
        print(f"| {h} | {b} | {bf16:.2f} | {e4m3:.2f} | {ratio:.2f}× | "
              f"≤ {goal(h, b):.2f}×{' ✓' if ok else ''} | {fastest_cell} | "
              f"{fp8[(h, b, 1, 'fp8w-auto')]['limit_us']:.2f} | "
              f"{floor_cell(fp8, h, b, 1, 'fp8w-auto')} |")
    print(f"\ne4m3 W_UV meets its goal at {met} of {len(shapes)} shapes.")
    within = sum(1 for h, b in shapes
                 if us(h, b, "fp8w-auto") is not None
                 and min((us(h, b, m) for m in kernels if us(h, b, m) is not None),
                         default=float("inf")) * 1.03 >= us(h, b, "fp8w-auto"))
    print(f"The e4m3 rule's kernel is within 3% of the fastest forced e4m3 kernel at {within} of "
          f"{len(shapes)} shapes.")

    output_path = os.path.join(folder, "tail_bench_fp8_output.csv")
    if os.path.exists(output_path):
        fp8 = load(output_path)
        shapes = sorted({(h, b) for h, b, q, m in fp8 if m == "auto" and q == 1})

    print("\n**The e4m3 output (bf16 W_UV) against the bf16-output tail and the unfused pair:**\n")
    print("| heads | rows | bf16 output (µs) | e4m3 output (µs) | added (µs) | pair (µs) | "
          "both e4m3 (µs) | both e4m3, pair (µs) | e4m3 output / floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    met = 0
    for h, b in shapes:
        bf16, out, pair = us(h, b, "auto"), us(h, b, "fp8o-auto"), us(h, b, "fp8o-pair")
        if bf16 is None or out is None or pair is None:
            continue
        both, both_pair = us(h, b, "fp8w-fp8o-auto"), us(h, b, "fp8w-fp8o-pair")
        ok = out <= bf16 + 0.2 and out < pair
        met += ok
        cell = lambda v: f"{v:.2f}" if v is not None else "–"
        print(f"| {h} | {b} | {bf16:.2f} | {out:.2f}{' ✓' if ok else ''} | {out - bf16:+.2f} | "
              f"{pair:.2f} | {cell(both)} | {cell(both_pair)} | "
              f"{floor_cell(fp8, h, b, 1, 'fp8o-auto')} |")
    print(f"\nThe e4m3 output within 0.2 µs of the bf16 output and faster than the pair at {met} "
          f"of {len(shapes)} shapes.")
    # Faster than the pair, and the e4m3 output's rule against every kernel forced on it.
    for weight, prefix in (("bf16", "fp8o-"), ("e4m3", "fp8w-fp8o-")):
        counted = faster = within = 0
        for h, b in shapes:
            out, pair = us(h, b, prefix + "auto"), us(h, b, prefix + "pair")
            forced = [v for m in kernels
                      if (v := us(h, b, prefix + m[len("fp8w-"):])) is not None]
            if out is None or pair is None or not forced:
                continue
            counted += 1
            faster += out < pair
            within += out <= 1.03 * min(forced)
        if counted:
            print(f"With {weight} W_UV the e4m3 output is faster than its pair at {faster} of "
                  f"{counted} shapes, and its rule's kernel within 3% of the fastest kernel forced "
                  f"on it at {within}.")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", default="bench/results/h200",
                        help="results folder holding tail_bench.csv and torch_peer.csv")
    parser.add_argument("--out", help="folder for efficiency.svg (default: the results folder)")
    parser.add_argument("--grids", action="store_true",
                        help="print rows x heads grids of the dispatched path (time, efficiency, "
                        "PyTorch's and cuBLASLt + gate's time over ours) instead, as "
                        "docs/benchmarks.md shows them")
    parser.add_argument("--exceptions", action="store_true",
                        help="print only the table of tail_bench_upstream_exceptions.csv: every "
                        "fused kernel after the upstream kernel at the rule's exception shapes")
    args = parser.parse_args()
    folder, out = args.folder, args.out or args.folder
    exceptions = os.path.join(folder, "tail_bench_upstream_exceptions.csv")
    if args.exceptions:
        print_exceptions(exceptions)
        return
    ours = load(os.path.join(folder, "tail_bench.csv"))
    torch = load(os.path.join(folder, "torch_peer.csv"))
    shapes = sorted({(h, b) for h, b, q, m in ours if m == "auto" and q == 1})
    if args.grids:
        print_grids(ours, torch, shapes)
        return
    replays = any((h, b, 1, "auto-replay") in ours for h, b in shapes)
    replay_head = " back-to-back replays (µs) |" if replays else ""
    flops = any(ours[(h, b, 1, "auto")].get("flop_us") is not None for h, b in shapes)
    flop_head = " FLOP time (µs) |" if flops else ""
    floors = any(ours[(h, b, 1, "auto")].get("stream_floor_us") for h, b in shapes)
    floor_head = " streaming floor (µs) | time / floor |" if floors else ""
    print(f"| heads | rows | ours, dispatched (µs) | fastest kernel (µs) |{replay_head} limit (µs) |"
          f"{flop_head} bound (µs) |{floor_head} efficiency | PyTorch (µs) | cuBLASLt+gate (µs) | "
          "vs PyTorch | vs cuBLASLt+gate |")
    print("|---:|---:|---:|---:|" + ("---:|" if replays else "") + "---:|" +
          ("---:|" if flops else "") + "---:|" + ("---:|---:|" if floors else "") +
          "---:|---:|---:|---:|---:|")
    met = {"bound": 0, "floor": 0, "torch2x": 0, "within3": 0}
    for h, b in shapes:
        auto = ours[(h, b, 1, "auto")]
        us, limit = auto["us_per_layer"], auto["limit_us"]
        # Every kernel the run forced (older runs: fused and bmm; later: each fused kernel).
        forced = {m: v["us_per_layer"] for (hh, bb, q, m), v in ours.items()
                  if (hh, bb, q) == (h, b, 1) and is_kernel_mode(m)}
        # A mode whose outputs failed their check has no row (the run failed): "nan" stands in.
        forced = forced or {"auto": us}
        fastest = min(forced, key=forced.get)
        peer = ours.get((h, b, 1, "peer"), {"us_per_layer": float("nan")})["us_per_layer"]
        pt = torch.get((h, b, 1, "torch"), {"us_per_layer": float("nan")})["us_per_layer"]
        bound = max(limit / 0.8, limit + 1.0)
        met["bound"] += us <= bound
        met["torch2x"] += pt / us >= 2.0
        met["within3"] += us <= 1.03 * forced[fastest]
        replay_cell = ""
        if replays:
            replay = ours.get((h, b, 1, "auto-replay"))
            replay_cell = f" {replay['us_per_layer']:.2f} |" if replay else " – |"
        flop_cell = ""
        if flops:
            flop_us = auto.get("flop_us")
            flop_cell = f" {flop_us:.2f} |" if flop_us is not None else " – |"
        floor_cells = ""
        if floors:
            floor = auto.get("stream_floor_us")
            met["floor"] += bool(floor) and us <= 1.15 * floor
            floor_cells = (f" {floor:.2f} | {floor_cell(ours, h, b, 1)} |" if floor
                           else " – | – |")
        print(f"| {h} | {b} | {us:.2f} | {forced[fastest]:.2f} {fastest} |{replay_cell} "
              f"{limit:.2f} |{flop_cell} {bound:.2f}{' ✓' if us <= bound else ''} |{floor_cells} "
              f"{100 * limit / us:.0f}% | "
              f"{pt:.2f} | {peer:.2f} | {pt / us:.2f}× | {peer / us:.2f}× |")
    n = len(shapes)
    floor_text = f"within 1.15x the streaming floor at {met['floor']}; " if floors else ""
    # The rule against the kernels only where the run forced fused kernels (else the fastest
    # forced mode is the BMM path, which says nothing of the rule).
    fused_forced = any(m.startswith("fused") for (_, _, _, m) in ours)
    within_text = (f"; dispatched within 3% of the fastest kernel at {met['within3']}"
                   if fused_forced else "; no fused kernel forced")
    print(f"\nOf {n} shapes: within the bound at {met['bound']}; {floor_text}at least 2x PyTorch "
          f"at {met['torch2x']}{within_text}.")
    if os.path.exists(exceptions):
        print()
        print_exceptions(exceptions)
    print_no_gate(folder)
    print_fp8(folder)
    heads = sorted({h for h, _ in shapes})
    lines = {h: [(b, 100 * ours[(h, b, 1, "auto")]["limit_us"] /
                  ours[(h, b, 1, "auto")]["us_per_layer"])
                 for hh, b in shapes if hh == h] for h in heads}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "efficiency.svg"), "w") as f:
        f.write(efficiency_svg(lines))


# One colour a head count, in the order of the legend.
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def efficiency_svg(lines):
    """The efficiency plot as SVG, with no plotting library: `lines` maps a head count to its
    (rows, efficiency %) points; rows on a log2 axis, efficiency 0-100%."""
    width, height, left, right, top, bottom = 720, 440, 70, 110, 40, 55
    plot_w, plot_h = width - left - right, height - top - bottom
    rows = sorted({b for points in lines.values() for b, _ in points})
    lo, hi = math.log2(rows[0]), math.log2(rows[-1])
    span = hi - lo or 1.0

    def x(b):
        return left + plot_w * (math.log2(b) - lo) / span

    def y(e):
        return top + plot_h * (1 - e / 100)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="14">mla-tail on an H200, '
           'per layer, cold L2, dispatched path</text>']
    for e in range(0, 101, 20):
        out.append(f'<line x1="{left}" y1="{y(e):.1f}" x2="{left + plot_w}" y2="{y(e):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(e) + 4:.1f}" text-anchor="end">{e}</text>')
    for b in rows:
        out.append(f'<line x1="{x(b):.1f}" y1="{top}" x2="{x(b):.1f}" y2="{top + plot_h}" '
                   'stroke="#eee"/>')
        out.append(f'<text x="{x(b):.1f}" y="{top + plot_h + 18}" text-anchor="middle">{b}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
               'stroke="#444"/>')
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 12}" text-anchor="middle">rows '
               '(tokens), q = 1</text>')
    out.append(f'<text transform="translate(18 {top + plot_h / 2}) rotate(-90)" '
               'text-anchor="middle">efficiency: byte-time limit / measured (%)</text>')
    for n, (h, points) in enumerate(sorted(lines.items())):
        colour = COLOURS[n % len(COLOURS)]
        path = " ".join(f"{x(b):.1f},{y(e):.1f}" for b, e in points)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out.extend(f'<circle cx="{x(b):.1f}" cy="{y(e):.1f}" r="3" fill="{colour}"/>'
                   for b, e in points)
        ly = top + 10 + 18 * n
        out.append(f'<line x1="{left + plot_w + 12}" y1="{ly}" x2="{left + plot_w + 32}" '
                   f'y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + plot_w + 38}" y="{ly + 4}">H = {h}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"

if __name__ == "__main__":
    main()

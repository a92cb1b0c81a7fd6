#!/usr/bin/env python3
"""Plots bus bandwidth against message size from gradcomm-perf -J files (or
nccl-tests -J files: the same layout), one line per file, to compare two machines,
two commits, or gradcomm with nccl-tests.

    tools/gradcomm_perf_plot.py before.json after.json -o busbw.png
    tools/gradcomm_perf_plot.py a.json:H100 b.json:H200 --in-place --time

FILE:LABEL names a line (default: collective, transport, ranks, host and version
from the file). --time plots the time per call instead. Needs matplotlib
(python/requirements-test.txt).
"""
import argparse
import json
import sys


def describe(doc, path):
    g = doc.get("gradcomm") or {}
    devices = (doc.get("config") or {}).get("devices") or [{}]
    host = devices[0].get("hostname", "?")
    if g:
        return f"{g.get('collective', '?')} {g.get('transport', '?')} {g.get('nranks', '?')} ranks, {host}"
    return f"nccl-tests {len(devices)} ranks, {host} ({path})"


def load(spec, in_place):
    path, _, label = spec.partition(":")
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"gradcomm_perf_plot: cannot read {path}: {e}")
    rows = doc.get("results")
    if not isinstance(rows, list) or not rows:
        sys.exit(f"gradcomm_perf_plot: {path} has no results (is it a -J file?)")
    key = "in_place" if in_place else "out_of_place"
    sizes, busbw, times = [], [], []
    for row in rows:
        part = row.get(key)
        if not isinstance(part, dict) or "size" not in row:
            sys.exit(f"gradcomm_perf_plot: {path}: a result without size/{key}: {json.dumps(row)[:120]}")
        sizes.append(row["size"])
        busbw.append(part["bus_bw"])
        times.append(part["time"])
    return label or describe(doc, path), sizes, busbw, times


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="-J files, each optionally FILE:LABEL")
    ap.add_argument("-o", "--output", default="gradcomm_perf.png", help="PNG to write (default %(default)s)")
    ap.add_argument("--in-place", action="store_true", help="plot the in-place columns (default out-of-place)")
    ap.add_argument("--time", action="store_true", help="plot time per call (us) instead of bus bandwidth")
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for spec in args.files:
        label, sizes, busbw, times = load(spec, args.in_place)
        ax.plot(sizes, times if args.time else busbw, marker="o", markersize=3, label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted({s for spec in args.files for s in load(spec, args.in_place)[1]})
    step = max(1, len(ticks) // 10)
    ax.set_xticks(ticks[::step], [human(t) for t in ticks[::step]], rotation=30, fontsize=8)
    if args.time:
        ax.set_yscale("log")
    ax.set_ylabel("time per call (us)" if args.time else "bus bandwidth (GB/s)")
    ax.set_xlabel("message size")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(args.title or ("in place" if args.in_place else "out of place"), fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"gradcomm_perf_plot: {len(args.files)} run(s) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

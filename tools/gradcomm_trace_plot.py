#!/usr/bin/env python3
"""Draws reducer step traces (GRADCOMM_TRACE_FILE / gcommReducerStartTrace) as a PNG,
for people who will not open a trace viewer.

    tools/gradcomm_trace_plot.py trace.rank0.json trace.rank1.json -o step.png
    tools/gradcomm_trace_plot.py 'trace.rank*.json' --steps 3-5 -o steps.png

One row pair per rank: the caller (backward until its last gradient was marked
ready, each bucket's "ready" mark, the scaler update) and the reducer's stream
(pack, collectives, epilogues, PowerSGD phases). The title gives each rank's
overlap: the fraction of communication that ran while backward was still going.
Default: the last step every file holds. Needs matplotlib (python/requirements-test.txt).
"""
import argparse
import glob
import json
import sys

COLORS = {"comm": "#d9480f", "pack": "#1c7ed6", "epilogue": "#2b8a3e", "backward": "#ced4da",
          "powersgd": "#7048e8", "other": "#868e96"}


def color_of(event):
    if event.get("cat") == "comm":
        return COLORS["comm"]
    name = event["name"]
    if name == "pack":
        return COLORS["pack"]
    if name == "epilogue":
        return COLORS["epilogue"]
    if name.startswith("PowerSGD"):
        return COLORS["powersgd"]
    return COLORS["other"]


def load(paths):
    """{rank: [events]} from the trace files (a glob pattern is expanded)."""
    files = []
    for p in paths:
        files.extend(sorted(glob.glob(p)) or [p])
    ranks = {}
    for path in files:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"gradcomm_trace_plot: cannot read {path}: {e}")
        if "traceEvents" not in doc:
            sys.exit(f"gradcomm_trace_plot: {path} is not a trace (no traceEvents)")
        # On rank 0's clock: each file's clock minus rank 0's, as straggler
        # attribution estimated it (0 before its first window, and on one host).
        offset = float(doc.get("otherData", {}).get("clock_offset_us", 0.0))
        for e in doc["traceEvents"]:
            if e.get("ph") in ("X", "i"):
                e["ts"] = e["ts"] - offset
                ranks.setdefault(e["pid"], []).append(e)
    if not ranks:
        sys.exit("gradcomm_trace_plot: the traces hold no steps")
    return ranks


def parse_steps(text, available):
    if text is None:
        return [max(available)]
    if text == "all":
        return sorted(available)
    lo, _, hi = text.partition("-")
    try:
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        sys.exit(f"gradcomm_trace_plot: --steps takes N, A-B or all, not {text!r}")
    wanted = [s for s in sorted(available) if lo <= s <= hi]
    if not wanted:
        sys.exit(f"gradcomm_trace_plot: no step in {text} (the traces hold {sorted(available)})")
    return wanted


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="trace files (one per rank) or glob patterns")
    ap.add_argument("-o", "--output", default="gradcomm_trace.png", help="PNG to write (default %(default)s)")
    ap.add_argument("--steps", help="N, A-B or all (default: the last step every file holds)")
    ap.add_argument("--title", help="title line above the per-rank overlap")
    args = ap.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ranks = load(args.traces)
    common = set.intersection(*({e["args"]["step"] for e in evs} for evs in ranks.values()))
    if not common:
        sys.exit("gradcomm_trace_plot: the files share no step")
    steps = parse_steps(args.steps, common)
    chosen = {r: [e for e in evs if e["args"]["step"] in steps] for r, evs in ranks.items()}
    t0 = min(e["ts"] for evs in chosen.values() for e in evs)

    order = sorted(chosen)
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.9 * len(order)))
    labels, overlaps = [], []
    for k, rank in enumerate(order):
        caller_y, reducer_y = 2 * k + 1, 2 * k
        labels += [(reducer_y, f"rank {rank} reducer"), (caller_y, f"rank {rank} caller")]
        for e in chosen[rank]:
            start = (e["ts"] - t0) / 1000.0
            if e["ph"] == "i":
                ax.plot([start, start], [caller_y - 0.4, caller_y + 0.4], color="black", linewidth=0.8)
                continue
            width = max(e.get("dur", 0), 0) / 1000.0
            if e.get("cat") == "step":
                if e["name"] == "backward":
                    ax.broken_barh([(start, width)], (caller_y - 0.3, 0.6), color=COLORS["backward"])
                else:
                    overlaps.append(f"rank {rank} step {e['args']['step']}: {100 * e['args']['overlap']:.0f}%")
                continue
            y = caller_y if e["tid"] == 1 else reducer_y
            ax.broken_barh([(start, width)], (y - 0.35, 0.7), color=color_of(e), edgecolor="white", linewidth=0.3)
    ax.set_yticks([y for y, _ in labels], [name for _, name in labels])
    ax.set_xlabel("ms from the first plotted step's begin")
    ax.set_ylim(-0.7, 2 * len(order) - 0.3)
    title = (args.title + "\n") if args.title else ""
    ax.set_title(title + "overlap of communication with backward: " + "; ".join(overlaps), fontsize=9)
    ax.legend(handles=[Patch(color=COLORS["backward"], label="backward (marking)"),
                       Patch(color=COLORS["pack"], label="pack"),
                       Patch(color=COLORS["comm"], label="collective"),
                       Patch(color=COLORS["epilogue"], label="epilogue"),
                       Patch(color=COLORS["powersgd"], label="PowerSGD"),
                       Patch(color=COLORS["other"], label="scaler / flag")],
              loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=6, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"gradcomm_trace_plot: steps {steps[0]}..{steps[-1]} of {len(order)} rank(s) -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

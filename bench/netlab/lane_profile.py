#!/usr/bin/env python3
"""What the reducer's lane spends a step on, from step traces (GRADCOMM_TRACE_FILE):
per rank, each span's mean milliseconds per traced step, its share of the step, and
how much of it ran while backward was still going.

    bench/netlab/lane_profile.py 'DIR/trace.rank*.json'

A quantized wire's spans are its phases (quantize, all_to_all, "sum, requantize",
all_gather, decode, error feedback); the comm spans include waiting for the peers.
"""
import argparse
import collections
import glob
import json
import statistics


def events(path):
    with open(path) as f:
        doc = json.load(f)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def profile(path):
    """(rank, steps, {span: [total_ms, overlapped_ms]}, median step ms, median backward ms)."""
    ev = events(path)
    rank = next(e["pid"] for e in ev if e.get("ph") == "M")
    steps = {e["args"]["step"]: e for e in ev if e.get("cat") == "step" and e["name"].startswith("step ")}
    backward = {e["args"]["step"]: e for e in ev if e.get("cat") == "step" and e["name"] == "backward"}
    spans = collections.defaultdict(lambda: [0.0, 0.0])
    for e in ev:
        if e.get("ph") != "X" or e.get("tid") != 2 or "step" not in e.get("args", {}):
            continue
        s = e["args"]["step"]
        if s not in steps:
            continue
        spans[e["name"]][0] += e["dur"] / 1e3
        end_of_backward = backward[s]["ts"] + backward[s]["dur"] if s in backward else e["ts"]
        spans[e["name"]][1] += max(0.0, min(e["ts"] + e["dur"], end_of_backward) - e["ts"]) / 1e3
    n = max(len(steps), 1)
    return (rank, len(steps), {k: (v[0] / n, v[1] / n) for k, v in spans.items()},
            statistics.median(e["dur"] / 1e3 for e in steps.values()) if steps else 0.0,
            statistics.median(e["dur"] / 1e3 for e in backward.values()) if backward else 0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="+")
    a = p.parse_args()
    paths = sorted(x for t in a.traces for x in (glob.glob(t) or [t]))
    for path in paths:
        rank, n, spans, step_ms, backward_ms = profile(path)
        lane = sum(v[0] for v in spans.values())
        print(f"rank {rank} ({path}): {n} steps, median step {step_ms:.1f} ms, backward {backward_ms:.1f} ms, "
              f"lane busy {lane:.1f} ms a step")
        print("| span | ms a step | share of the step | during backward |")
        print("|---|---|---|---|")
        for name, (ms, during) in sorted(spans.items(), key=lambda kv: -kv[1][0]):
            print(f"| {name} | {ms:.1f} | {100 * ms / step_ms:.0f}% | {during:.1f} ms |")
        print()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarizes bench/netlab/stragglers.sh's runs: for each scenario, the first
window that named the late rank in the right phase and how many steps after the
delay began it came; wrong names; false alarms of the clean run; the cost of
attribution (on/off ratio of the median step). Prints a Markdown table and
writes OUT/summary.json.
    bench/netlab/straggler_report.py OUT"""
import json
import os
import statistics
import sys

EXPECTED = {"backward": "compute", "data": "data", "optimizer": "optimizer", "link": "link"}


def load(folder):
    ranks = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                ranks.append(json.load(f))
    return ranks


def scenario(name, ranks):
    r0 = ranks[0]
    kind = name.split("-", 1)[1]
    row = {"scenario": name, "model": r0["model"], "median_step_ms": 1e3 * statistics.median(r0.get("step_s") or [0])}
    if kind == "overhead":
        o = [r["overhead"] for r in ranks]
        row.update(ratio_on_off=statistics.median(x["ratio_on_off"] for x in o),
                   on_ms=1e3 * statistics.median(x["on"]["median_s"] for x in o),
                   off_ms=1e3 * statistics.median(x["off"]["median_s"] for x in o),
                   steps_each=o[0]["on"]["steps"], false_alarms=r0["named_windows"], windows=r0["windows"])
        return row
    windows = r0["windows"]
    verdicts = lambda r: [(w["last_step"], w["late_rank"], w["phase"]) for w in r["windows"]]  # noqa: E731
    agree = all(verdicts(r) == verdicts(r0) for r in ranks)  # every rank judged alike
    row.update(windows=len(windows), ranks_agree=agree)
    if kind == "clean":
        row["false_alarms"] = sum(1 for w in windows if w["late_rank"] >= 0)
        row["steps"] = windows[-1]["last_step"] if windows else 0
        return row
    want_rank = 2 if kind == "link" else r0["late_rank"]
    start = 2 if kind == "link" else r0["late_from"]  # the first window begins at synced step 2
    named = [w for w in windows if w["late_rank"] == want_rank and w["phase"] == EXPECTED[kind]]
    wrong = [w for w in windows if w["late_rank"] >= 0 and (w["late_rank"], w["phase"]) != (want_rank, EXPECTED[kind])]
    row.update(late_rank=want_rank, phase=EXPECTED[kind],
               named_at_step=named[0]["last_step"] if named else None,
               steps_to_name=(named[0]["last_step"] - start + 1) if named else None,
               named_windows=len(named), wrong_windows=len(wrong),
               median_late_ms=statistics.median(w["late_ms"] for w in named) if named else None)
    return row


def main():
    out = sys.argv[1]
    rows = []
    for name in sorted(os.listdir(out)):
        folder = os.path.join(out, name)
        if os.path.isdir(folder) and load(folder):
            rows.append(scenario(name, load(folder)))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("| scenario | median step | windows | named (rank, phase) | steps to name | wrong | late (median) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "ratio_on_off" in r:
            print(f"| {r['scenario']} | on {r['on_ms']:.1f} ms / off {r['off_ms']:.1f} ms | {r['windows']} | "
                  f"cost: ratio {r['ratio_on_off']:.4f} over {r['steps_each']} steps each | | "
                  f"{r['false_alarms']} false alarms | |")
        elif "false_alarms" in r:
            print(f"| {r['scenario']} | {r['median_step_ms']:.1f} ms | {r['windows']} ({r['steps']} steps) | "
                  f"none expected | | {r['false_alarms']} false alarms | |")
        else:
            late = f"{r['median_late_ms']:.0f} ms" if r["median_late_ms"] is not None else "-"
            print(f"| {r['scenario']} | {r['median_step_ms']:.1f} ms | {r['windows']} | rank {r['late_rank']} "
                  f"{r['phase']}: {r['named_windows']} windows | {r['steps_to_name']} | {r['wrong_windows']} | "
                  f"{late} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

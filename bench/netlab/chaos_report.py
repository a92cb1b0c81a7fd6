#!/usr/bin/env python3
"""The chaos run's report (bench/netlab/chaos.py): reads DIR/events.tsv and each
slot's log in DIR/lab/, and with --baseline the undisturbed run's, and prints a
Markdown report: failures survived, steps discarded per failure, the time from
each failure to the next committed step, newcomers' catch-up against the link
rate, the final evaluation loss against the baseline's, and whether every
finished member holds the same parameters.

  bench/netlab/chaos_report.py DIR [--baseline BASE_DIR] > DIR/report.md
"""
import argparse
import glob
import os
import re
import statistics

COMMITTED = re.compile(r"committed step (\d+) at ([0-9.]+), world (\d+)")
DISCARDED = re.compile(r"step (\d+) discarded \((.*)\)$")
CAUGHT_UP = re.compile(r"caught up: received (\d+) bytes of state from (\d+) holder\(s\) in ([0-9.]+) s")
FINAL = re.compile(r"rank (\d+) of (\d+): committed (\d+) steps, .* params ([0-9a-f]+), .* eval loss ([0-9.e+-]+)")
GENERATION = re.compile(r"^generation (\d+): rank (\d+) of (\d+) at step (\d+): (.*)$")
DIVERGED = re.compile(r"DIVERGED")


def read_run(path):
    run = {"commits": [], "discards": set(), "caught_up": [], "finals": [], "generations": {}, "diverged": 0,
           "runs": 0}
    for log in sorted(glob.glob(os.path.join(path, "lab", "rank*.log"))):
        for line in open(log, errors="replace"):
            line = line.rstrip("\n")
            if line.startswith("[rank"):
                line = line.split("] ", 1)[-1]
            if m := COMMITTED.search(line):
                run["commits"].append((float(m[2]), int(m[1]), int(m[3])))
            elif m := DISCARDED.search(line):
                run["discards"].add(int(m[1]))
            elif m := CAUGHT_UP.search(line):
                run["caught_up"].append((int(m[1]), int(m[2]), float(m[3])))
            elif m := FINAL.search(line):
                run["finals"].append((int(m[3]), m[4], float(m[5])))
            elif m := GENERATION.search(line):
                run["generations"][int(m[1])] = (int(m[3]), m[5])
            elif " starts at " in line:
                run["runs"] += 1
            if DIVERGED.search(line):
                run["diverged"] += 1
    run["commits"].sort()
    return run


def read_events(path):
    events = []
    with open(os.path.join(path, "events.tsv")) as f:
        for line in f.read().splitlines()[1:]:
            t, kind, pid, name = line.split("\t")
            events.append((float(t), kind, int(pid), name))
    return events


def link_rate_bits(path):
    try:
        text = open(os.path.join(path, "lab", "link.txt")).read()
        held = float(re.search(r"held_gbit ([0-9.]+)", text)[1])
        return held * 1e9, text.strip()
    except (OSError, TypeError):
        return None, "no link.txt"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--baseline")
    p.add_argument("--batch", type=int, default=32, help="samples a rank trains on a step (chaos_member.py: 64)")
    a = p.parse_args()
    run, events = read_run(a.dir), read_events(a.dir)
    failures = [e for e in events if e[1] in ("sigkill", "sigstop")]
    kills = [e for e in failures if e[1] == "sigkill"]
    stops = [e for e in failures if e[1] == "sigstop"]
    rate, link = link_rate_bits(a.dir)
    commit_times = sorted({(t, s) for t, s, _ in run["commits"]})
    first_commit = {}
    for t, s in commit_times:
        first_commit.setdefault(s, t)
    steps_by_time = sorted((t, s) for s, t in first_commit.items())

    def next_commit_after(t0):
        for t, s in steps_by_time:
            if t > t0:
                return t - t0, s
        return None, None

    out = []
    out.append(f"# Chaos run: {os.path.basename(os.path.abspath(a.dir))}\n")
    out.append(f"Link: {link}\n")
    finished = run["finals"]
    hashes = {h for _, h, _ in finished}
    last_step = max((s for s, _, _ in finished), default=0)
    out.append(f"- failures: {len(failures)} ({len(kills)} SIGKILL, {len(stops)} SIGSTOP), member runs started: "
               f"{run['runs']} (restarts included)")
    out.append(f"- the job was never restarted: it committed steps 1..{last_step} once each, "
               f"{len(finished)} members finished at step {last_step} with {len(hashes)} parameter hash(es); "
               f"divergence checks failed: {run['diverged']} (every 10 steps, on every live member)")
    out.append(f"- generations: {len(run['generations'])}; discarded steps: {len(run['discards'])} "
               f"({len(run['discards']) / max(1, len(failures)):.2f} per failure)")
    rows = []
    for t, kind, pid, name in failures:
        dt, step = next_commit_after(t)
        rows.append((kind, name, dt, step))
    kill_dts = [dt for kind, _, dt, _ in rows if kind == "sigkill" and dt is not None]
    stop_dts = [dt for kind, _, dt, _ in rows if kind == "sigstop" and dt is not None]
    if kill_dts:
        out.append(f"- SIGKILL to the next committed step: median {statistics.median(kill_dts):.2f} s, "
                   f"max {max(kill_dts):.2f} s (n = {len(kill_dts)})")
    if stop_dts:
        out.append(f"- SIGSTOP to the next committed step: median {statistics.median(stop_dts):.2f} s, "
                   f"max {max(stop_dts):.2f} s (n = {len(stop_dts)})")
    if run["caught_up"]:
        speeds = [b * 8 / s for b, _, s in run["caught_up"] if s > 0]
        line = (f"- newcomers caught up {len(run['caught_up'])} times: "
                f"{run['caught_up'][0][0] / 2**20:.0f} MiB each, median {statistics.median([s for _, _, s in run['caught_up']]):.2f} s, "
                f"median {statistics.median(speeds) / 1e9:.3f} Gbit/s")
        if rate:
            line += f" = {statistics.median(speeds) / rate:.0%} of the link's held rate"
        out.append(line)
    if finished:
        loss = statistics.median(l for _, _, l in finished)
        out.append(f"- final evaluation loss: {loss:.8f}")
        samples = sum(w for _, _, w in {(s, 0, w) for _, s, w in run["commits"]})
        out.append(f"- samples trained on ({a.batch} a rank a committed step): {a.batch * samples}")
    if a.baseline:
        base = read_run(a.baseline)
        if base["finals"]:
            bl = statistics.median(l for _, _, l in base["finals"])
            bsamples = sum(w for _, _, w in {(s, 0, w) for _, s, w in base["commits"]})
            out.append(f"- undisturbed run, same committed steps: evaluation loss {bl:.8f}, samples {a.batch * bsamples}; "
                       f"the chaos run's loss is {loss / bl:.5f}x" if finished else "")
            if base["commits"]:
                span = base["commits"][-1][0] - base["commits"][0][0]
                out.append(f"- undisturbed step time: {span / max(1, len(set(s for _, s, _ in base['commits'])) - 1):.3f} s")
    if commit_times:
        span = commit_times[-1][0] - commit_times[0][0]
        out.append(f"- chaos run: {span:.0f} s from the first to the last committed step")
    out.append("\n| failure | member | to the next committed step (s) | that step |\n|---|---|---|---|")
    for kind, name, dt, step in rows:
        out.append(f"| {kind} | {name} | {'' if dt is None else f'{dt:.2f}'} | {step or ''} |")
    out.append("\n| generation | world | what changed |\n|---|---|---|")
    for g, (world, change) in sorted(run["generations"].items()):
        out.append(f"| {g} | {world} | {change[:300]} |")
    print("\n".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Median out-of-place and in-place time per variant and size over the rounds of a
perf_pieces.sh log, and the ratio to the link's time (size x 2(n-1)/n at RATE
bytes/s). Usage: perf_table.py LOG RANKS RATE_GBIT"""
import collections, json, re, statistics, sys

log, n, gbit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rate = gbit * 1e9 * 0.956 / 8  # what the lab's links hold (docs/netlab.md)
t = collections.defaultdict(list)
v = None
for line in open(log):
    m = re.match(r"== round \d+ (\S+)", line)
    if m:
        v = m.group(1); continue
    if line.startswith("{"):
        d = json.loads(line); t[(v, d["bytes"])].append((d["time_us"], d["time_us"])); continue
    f = line.split()
    if len(f) >= 13 and f[0].isdigit():
        t[(v, int(f[0]))].append((float(f[5]), float(f[9])))
sizes = sorted({s for _, s in t})
variants = list(dict.fromkeys(k[0] for k in t))
print(f"{log}: median ms over rounds (out of place / in place), x the link's time at {gbit:g} Gbit (held 95.6%)")
print("| variant | " + " | ".join(f"{s >> 20} MiB" for s in sizes) + " |")
print("|---|" + "---|" * len(sizes))
for var in variants:
    cells = []
    for s in sizes:
        r = t.get((var, s))
        if not r: cells.append("-"); continue
        o, i = statistics.median(x[0] for x in r) / 1e3, statistics.median(x[1] for x in r) / 1e3
        ideal = s * 2 * (n - 1) / n / rate * 1e3
        cells.append(f"{o:.1f} / {i:.1f} ({o / ideal:.2f}x)" if var != "gloo" else f"{o:.1f} ({o / ideal:.2f}x)")
    print(f"| {var} | " + " | ".join(cells) + " |")

#!/usr/bin/env python3
"""The table of bench/comm/host_transports.sh's results: per world size and
message size, the median over rounds of gradcomm-perf's out-of-place all-reduce
time on the shm and socket transports and of torch's gloo, and the ratios
gloo / shm and socket / shm. Usage: compare_host_transports.py FOLDER"""
import json
import pathlib
import statistics
import sys
from collections import defaultdict

folder = pathlib.Path(sys.argv[1])
times = defaultdict(lambda: defaultdict(list))  # (n, variant) -> bytes -> [us]
for f in folder.glob("gradcomm-perf-*.json"):
    _, _, variant, rest = f.name.split("-", 3)
    n = int(rest.split(".")[0])
    for row in json.loads(f.read_text())["results"]:
        times[(n, variant)][row["size"]].append(row["out_of_place"]["time"])
for f in folder.glob("torch-gloo-*.jsonl"):
    n = int(f.name.split("-")[2].split(".")[0])
    for line in f.read_text().splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            times[(n, "gloo")][row["bytes"]].append(row["time_us"])
for n in sorted({k[0] for k in times}):
    med = {v: {b: statistics.median(t) for b, t in times[(n, v)].items()} for v in ("shm", "socket", "gloo")}
    sizes = sorted(set(med["shm"]) & set(med["socket"]) & set(med["gloo"]))
    print(f"## {n} ranks\n")
    print("| bytes | shm (us) | socket (us) | gloo (us) | gloo / shm | socket / shm |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in sizes:
        s, k, g = med["shm"][b], med["socket"][b], med["gloo"][b]
        print(f"| {b} | {s:,.1f} | {k:,.1f} | {g:,.1f} | {g / s:.2f} | {k / s:.2f} |")
    print()

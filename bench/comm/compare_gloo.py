#!/usr/bin/env python3
"""Prints the gloo / gradcomm time table from a results folder holding
gradcomm-perf-socket-N.json (gradcomm-perf -J) and torch-gloo-N.jsonl
(torch_gloo_peer.py), for every N present. Usage: compare_gloo.py FOLDER"""
import json
import pathlib
import sys

folder = pathlib.Path(sys.argv[1])
for ours in sorted(folder.glob("gradcomm-perf-socket-*.json")):
    n = ours.stem.rsplit("-", 1)[1]
    peer_file = folder / f"torch-gloo-{n}.jsonl"
    if not peer_file.exists():
        continue
    rows = json.loads(ours.read_text())["results"]
    # nccl-tests' layout (since issue 18), or gradcomm-perf's flat one before it.
    if rows and "bytes" in rows[0]:
        gradcomm = {r["bytes"]: r["time_out_us"] for r in rows}
    else:
        gradcomm = {r["size"]: r["out_of_place"]["time"] for r in rows}
    gloo = {}
    for line in peer_file.read_text().splitlines():
        row = json.loads(line)
        gloo[row["bytes"]] = row["time_us"]
    print(f"## {n} ranks\n\n| bytes | gradcomm (us) | gloo (us) | gloo / gradcomm |\n|---:|---:|---:|---:|")
    for size in sorted(set(gradcomm) & set(gloo)):
        print(f"| {size} | {gradcomm[size]:,.1f} | {gloo[size]:,.1f} | {gloo[size] / gradcomm[size]:.2f} |")
    print()

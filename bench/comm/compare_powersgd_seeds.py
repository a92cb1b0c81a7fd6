#!/usr/bin/env python3
"""First compressed step's approximation error over seeds: gradcomm against
PyTorch's powerSGD_hook. Reads gradcomm-powersgd-bench --error-steps 1 --seed S
lines (gradcomm.jsonl) and torch_powersgd_peer.py --error-steps 1 --seed S lines
(torch_powersgd_hook.jsonl) from one folder; prints a markdown table per set:
mean, standard deviation, standard error of the mean, range, and the ratio of the
means.

  python3 bench/comm/compare_powersgd_seeds.py bench/results/2026-11-23-cpu-powersgd-seeds
"""
import json
import math
import os
import sys


def load(path):
    by_set = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            by_set.setdefault(row["set"], {})[row["seed"]] = row["errors"][0]
    return by_set


def stats(values):
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    return n, mean, sd, sd / math.sqrt(n), min(values), max(values)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    ours = load(os.path.join(folder, "gradcomm.jsonl"))
    peer = load(os.path.join(folder, "torch_powersgd_hook.jsonl"))
    print("| set | side | seeds | mean | sd | s.e. of mean | min | max |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for name in sorted(ours):
        if name not in peer:
            continue
        rows = []
        for side, data in (("gradcomm", ours[name]), ("PyTorch", peer[name])):
            n, mean, sd, se, lo, hi = stats(list(data.values()))
            rows.append((mean, se))
            print(f"| {name} | {side} | {n} | {mean:.4f} | {sd:.4f} | {se:.4f} | {lo:.4f} | {hi:.4f} |")
        (m1, s1), (m2, s2) = rows
        ratio = m1 / m2
        # Standard error of the ratio of two independent means (first order).
        ratio_se = ratio * math.sqrt((s1 / m1) ** 2 + (s2 / m2) ** 2)
        ratios.append((name, ratio, ratio_se))
    print()
    for name, ratio, se in ratios:
        print(f"{name}: gradcomm / PyTorch mean error = {ratio:.4f} (standard error {se:.4f})")


if __name__ == "__main__":
    main()

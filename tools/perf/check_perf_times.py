"""Checks a gradcomm-perf JSON file's times: every rank timed every size, and the
reported time is -a's aggregate (rank 0's, mean, min or max) of the ranks' times."""
import json
import sys

path, nranks = sys.argv[1], int(sys.argv[2])
d = json.load(open(path))
pick = {"rank0": lambda t: t[0], "avg": lambda t: sum(t) / len(t), "min": min, "max": max}[d["average"]]
for r in d["results"]:
    for p in ("out", "in"):
        t = r[f"rank_time_{p}_us"]
        assert len(t) == nranks and all(x > 0 for x in t), (p, r)
        want, got = pick(t), r[f"time_{p}_us"]
        assert abs(got - want) <= 1e-4 * want, (d["average"], p, got, want, r)
        assert abs(r[f"algbw_{p}"] - r["bytes"] / got / 1e3) <= 1e-4 * r[f"algbw_{p}"] + 1e-12, r
print(f"{path}: {len(d['results'])} sizes, time = {d['average']} of {nranks} ranks")

"""Checks a gradcomm-perf JSON file's times: every rank timed every size, and the
reported time is -a's aggregate (rank 0's, mean, min or max) of the ranks' times."""
import json
import sys

path, nranks = sys.argv[1], int(sys.argv[2])
d = json.load(open(path))
average = d["gradcomm"]["average"]
pick = {"rank0": lambda t: t[0], "avg": lambda t: sum(t) / len(t), "min": min, "max": max}[average]
for r in d["results"]:
    for p in ("out_of_place", "in_place"):
        t = r["gradcomm_rank_times_us"][p]
        assert len(t) == nranks and all(x > 0 for x in t), (p, r)
        want, got = pick(t), r[p]["time"]
        assert abs(got - want) <= 1e-4 * want, (average, p, got, want, r)
        assert abs(r[p]["alg_bw"] - r["size"] / got / 1e3) <= 1e-4 * r[p]["alg_bw"] + 1e-12, r
print(f"{path}: {len(d['results'])} sizes, time = {average} of {nranks} ranks")

"""Checks a gradcomm-perf -J file against nccl-tests' JSON layout (2.19, file
version 3: the keys and types its util.cu writes, quirks included) and that every
row validated. Usage: check_perf_json.py FILE NRANKS [ROWS]"""
import json
import sys

path, nranks = sys.argv[1], int(sys.argv[2])
rows = int(sys.argv[3]) if len(sys.argv) > 3 else None
d = json.load(open(path))
for key, kind in [("version", int), ("start_time", str), ("end_time", str), ("args", list), ("env", list),
                  ("nccl_version", int), ("config", dict), ("results", list), ("out_of_bounds", dict),
                  ("average_bus_bandwidth", dict), ("errors", list)]:
    assert isinstance(d.get(key), kind), (key, d.get(key))
assert d["version"] == 3 and d["errors"] == [], d
c = d["config"]
for key in ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "warmup_iters", "iterations",
            "aggregated_iterations", "validation", "graph", "per_iter_skip"):
    assert isinstance(c[key], int), (key, c)
assert ("step_factor" in c) != ("step_bytes" in c), c
for key in ("blocking_collectives", "per_iter_timing", "parallel_init"):
    assert c[key] in ("true", "false"), (key, c)  # nccl-tests writes its booleans as strings
assert len(c["devices"]) == nranks, c["devices"]
for rank, dev in enumerate(c["devices"]):
    assert dev["rank"] == rank and set(dev) == {"rank", "group", "pid", "hostname", "device", "device_hex",
                                                  "device_info"}, dev
assert rows is None or len(d["results"]) == rows, (rows, len(d["results"]))
for r in d["results"]:
    assert {"size", "count", "type", "redop", "root", "out_of_place", "in_place", "actual_iterations",
            "experiment_name"} <= set(r), r
    assert isinstance(r["root"], str) and len(r["root"]) == 6, r  # "%6i", as the table's column
    for p in ("out_of_place", "in_place"):
        half = r[p]
        if half is None and p == "in_place" and r.get("gradcomm_note") in (
                "all-to-all has no in-place variant", "a buffer sent must not be received into in the same group"):
            continue
        assert {"alg_bw", "bus_bw", "nwrong"} <= set(half) and ("time" in half) != ("cpu_time" in half), half
        assert half["nwrong"] is None or half["nwrong"] == 0, (p, r)
        if d["config"]["per_iter_timing"] == "true":  # -I: each half has its per-iteration object
            it = r[p + "_per_iter"]
            assert {"skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us",
                    "cv_pct", "times_us"} <= set(it), it
            assert len(it["times_us"]) == d["config"]["iterations"], it
assert d["out_of_bounds"] == {"count": 0, "okay": "true"}, d["out_of_bounds"]
assert isinstance(d["average_bus_bandwidth"]["bandwidth"], (int, float))
print(f"{path}: nccl-tests layout, {len(d['results'])} rows, {nranks} ranks")

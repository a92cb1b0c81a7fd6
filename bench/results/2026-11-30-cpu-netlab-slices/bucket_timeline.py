import json, glob, sys, collections, statistics
paths = sorted(glob.glob(sys.argv[1]))
sizes = [float(x) for x in sys.argv[2].split(",")]  # MB per bucket, in bucket order
rate = float(sys.argv[3]) if len(sys.argv) > 3 else 0.956e9 / 8 / 1e6  # MB/ms *1e3 -> MB per s
n = len(paths)
per = collections.defaultdict(dict)  # (step,bucket,name) -> rank -> (ts,end)
steps = collections.defaultdict(dict)
for r, p in enumerate(paths):
    ev = json.load(open(p)); ev = ev['traceEvents'] if isinstance(ev, dict) else ev
    for e in ev:
        if e.get('ph') != 'X': continue
        a = e.get('args', {})
        if e.get('tid') == 2 and 'bucket' in a:
            per[(a['step'], a['bucket'], e['name'])][r] = (e['ts'] / 1e3, (e['ts'] + e['dur']) / 1e3)
        if e.get('cat') == 'step':
            steps[a.get('step')][(r, e['name'])] = (e['ts'] / 1e3, (e['ts'] + e['dur']) / 1e3)
allsteps = sorted({k[0] for k in per})
tot = collections.defaultdict(list)
for s in allsteps:
    origin = min(v[0] for (rr, name), v in steps[s].items() if name == 'backward')
    line = [f"step {s}:"]
    for b in range(len(sizes)):
        ar = per.get((s, b, 'all_reduce'), {})
        if len(ar) < n: continue
        join = max(v[0] for v in ar.values()); first = min(v[0] for v in ar.values())
        end = max(v[1] for v in ar.values())
        ideal = sizes[b] * 2 * (n - 1) / n / rate * 1e3
        line.append(f"b{b} first {first-origin:.0f} join {join-origin:.0f} end {end-origin:.0f} (x{(end-join)/ideal:.2f} ideal {ideal:.0f})")
        tot[b].append((end - join) / ideal)
    bw = [v for (rr, name), v in steps[s].items() if name == 'backward']
    line.append("bwd " + "/".join(f"{v[1]-origin:.0f}" for v in bw))
    print("  ".join(line))
for b, v in tot.items(): print(f"bucket {b}: median {statistics.median(v):.2f}x ideal")

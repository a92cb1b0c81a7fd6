#!/usr/bin/env python3
"""Tables and plots of the network lab's wire comparison (bench/netlab/compare.sh).

    python bench/netlab/report.py RESULTS_DIR [--png-prefix PATH]

RESULTS_DIR holds one folder per run (<model>-<rate>-w<ranks>/, each with the ranks'
rankR.json from wire_train.py and netlab's link.txt). Prints a Markdown table per run
and writes one PNG per link rate: the smoothed loss against training time, one panel
per model and rank count.

Per variant:
  step ms       the median over the timed steps of the slowest rank's step time
  mean ms       their mean: what a step costs with the syncs of outer synchronization
                (gc_diloco*: most steps send nothing, one in --sync-every sends a lot)
  MB/step       bytes this rank's interface sent per step (mean over ranks, headers included)
  final loss    the mean over ranks of the last --window steps' losses
  to target     training time (sum of the slowest rank's step times, warm-up steps
                included) until the loss, averaged over ranks and over the last --window
                steps, first reaches the target: what ddp_f32 reaches at 75% of its steps
  vs peer       the ratio of step time (and of time to target) to PyTorch's answer for
                the same job: gc_f32, gc_int8/fp8/fp4 and gc_diloco* against ddp_f32, gc_f16 against
                ddp_f16hook, gc_psgdR against ddp_psgdR; a variant with its own bucket
                size (gc_f32@4) against the peer of that size if the run has one
                (ddp_f32@4), else against the peer at --bucket-mb (or the wrappers'
                default buckets)
"""
import argparse
import glob
import json
import os
import statistics
import sys

PEER = {"gc_f32": "ddp_f32", "gc_f16": "ddp_f16hook", "gc_int8": "ddp_f32", "gc_fp8": "ddp_f32",
        "gc_fp4": "ddp_f32", "gc_psgd4": "ddp_psgd4", "gc_psgd1": "ddp_psgd1", "gc_diloco": "ddp_f32",
        "gc_diloco_int8": "ddp_f32", "gc_diloco_fp4": "ddp_f32", "gc_sdiloco": "ddp_f32",
        "gc_sdiloco_int8": "ddp_f32", "gc_sdiloco_fp4": "ddp_f32"}
TARGET_AT = 0.75


def peer_of(v, rows=()):
    """PyTorch's answer to variant v. A variant with its own bucket size ("gc_f32@4") is
    compared with the peer of the same size when the run has it, else with the peer at
    the run's --bucket-mb; the table names which."""
    base, at, mb = v.partition("@")
    peer = PEER.get(base.removesuffix("_inline"))
    if peer and at and f"{peer}@{mb}" in rows:
        return f"{peer}@{mb}"
    return peer


def load_run(folder):
    ranks = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(folder, "rank*.json")))]
    if not ranks:
        return None
    link = {}
    lt = os.path.join(folder, "link.txt")
    if os.path.exists(lt):
        words = open(lt).read().split()
        link = dict(zip(words[::2], words[1::2]))
    return dict(name=os.path.basename(folder.rstrip("/")), ranks=ranks, link=link)


def smooth(xs, w):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= w:
            acc -= xs[i - w]
        out.append(acc / min(i + 1, w))
    return out


def summarize(run, window):
    r0 = run["ranks"][0]
    warm = r0["warmup"]
    rows = {}
    for v in r0["variants"]:
        per = [r["variants"][v] for r in run["ranks"]]
        n = min(len(p["times_ms"]) for p in per)
        slowest = [max(p["times_ms"][i] for p in per) for i in range(n)]
        loss = [statistics.fmean(p["losses"][i] for p in per) for i in range(n)]
        timed_steps = sum(b["steps"] for b in per[0]["blocks"][1:])
        tx = statistics.fmean(sum(b["tx_bytes"] for b in p["blocks"][1:]) for p in per) / max(timed_steps, 1)
        cum, t = [], 0.0
        for s in slowest:
            t += s / 1e3
            cum.append(t)
        timing = [t for p in per for t in p.get("timing", [])[1:]]
        rows[v] = dict(step_ms=statistics.median(slowest[warm:]), mean_ms=statistics.fmean(slowest[warm:]),
                       tx_mb=tx / 1e6, curve=smooth(loss, window),
                       cum_s=cum, final=statistics.fmean(loss[-window:]),
                       overlap=statistics.fmean(t["overlap"] for t in timing) if timing else None)
    if "ddp_f32" in rows:
        c = rows["ddp_f32"]["curve"]
        target = c[int(TARGET_AT * (len(c) - 1))]
    else:
        target = None
    for row in rows.values():
        hit = next((i for i, l in enumerate(row["curve"]) if target is not None and l <= target), None)
        row["to_target_s"] = row["cum_s"][hit] if hit is not None else None
    return rows, target


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def table(run, rows, target):
    r0 = run["ranks"][0]
    held = run["link"].get("held_gbit")
    lines = [f"#### {run['name']}: {r0['model']} ({r0['params'] / 1e6:.1f} M parameters, batch {r0['batch']} per rank), "
             f"{r0['world']} ranks, link {run['link'].get('rate', '?')}" + (f" (holds {float(held):.2f} Gbit/s)" if held else ""),
             "",
             f"Target loss {fmt(target, '.4f')} (ddp_f32's at {TARGET_AT:.0%} of {len(rows['ddp_f32']['curve']) if 'ddp_f32' in rows else '?'} steps); "
             f"{r0['rounds']} rounds of {r0['steps']} steps after {r0['warmup']} warm-up steps; torch {r0['torch']}, "
             f"gradcomm {r0['gradcomm']}.",
             "",
             "| variant | step ms | vs peer | mean ms | MB/step sent | to target s | vs peer | final loss | overlap |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v, row in rows.items():
        peer = rows.get(peer_of(v, rows) or "", None)
        ratio = f"{row['step_ms'] / peer['step_ms']:.2f}x {peer_of(v, rows)}" if peer else ""
        tt = ""
        if peer and row["to_target_s"] and peer["to_target_s"]:
            tt = f"{row['to_target_s'] / peer['to_target_s']:.2f}x"
        lines.append(f"| {v} | {row['step_ms']:.0f} | {ratio} | {row['mean_ms']:.0f} | {row['tx_mb']:.1f} "
                     f"| {fmt(row['to_target_s'], '.1f', 'not reached')} "
                     f"| {tt} | {row['final']:.4f} | {fmt(row['overlap'], '.0%', '')} |")
    for v in rows:  # what each gradcomm wrapper's bucket autotune chose (rank 0's report)
        t = r0["variants"].get(v, {}).get("bucket_autotune")
        if t and t["state"] == "chosen":
            lines.append(f"\n{v}: bucket autotune chose {t['bucket_cap_bytes'] / 2**20:g} MiB at synced step "
                         f"{t['chosen_at_step']} (rank 0 measured {t['link_alpha_us'] / 1e3:.2f} ms a call, "
                         f"{t['link_bytes_per_s'] / 1e6:.0f} MB/s, backward {t['backward_us'] / 1e3:.0f} ms; "
                         f"last bucket predicted to end {t['predicted_us'] / 1e3:.0f} ms after the last step's end, "
                         f"{t['predicted_configured_us'] / 1e3:.0f} ms at {t['configured_cap_bytes'] / 2**20:g} MiB)")
        elif t and t["state"] != "off":
            lines.append(f"\n{v}: bucket autotune {t['state']}")
    return "\n".join(lines)


def plot(runs_by_rate, prefix):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    for rate, runs in sorted(runs_by_rate.items()):
        fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
        for ax, (run, rows, target) in zip(axes[0], runs):
            for v, row in rows.items():
                ax.plot(row["cum_s"], row["curve"], label=v, linestyle="-" if v.startswith("gc") else "--")
            if target is not None:
                ax.axhline(target, color="grey", linewidth=0.8)
            r0 = run["ranks"][0]
            ax.set_title(f"{r0['model']}, {r0['world']} ranks, {rate}")
            ax.set_xlabel("training time (s)")
            ax.set_ylabel("loss (mean over ranks, smoothed)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = f"{prefix}{rate}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--png-prefix", help="PNG path prefix (default RESULTS/loss-); '' for none")
    a = p.parse_args()
    runs = [r for r in (load_run(d) for d in sorted(glob.glob(os.path.join(a.results, "*/")))) if r]
    if not runs:
        print(f"report: no rank*.json under {a.results}/*/", file=sys.stderr)
        return 1
    by_rate = {}
    for run in runs:
        rows, target = summarize(run, a.window)
        print(table(run, rows, target) + "\n")
        by_rate.setdefault(run["link"].get("rate", "unshaped"), []).append((run, rows, target))
    prefix = os.path.join(a.results, "loss-") if a.png_prefix is None else a.png_prefix
    if prefix:
        for path in plot(by_rate, prefix):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

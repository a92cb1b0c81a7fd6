#!/usr/bin/env python3
"""Reads the flight records of a job's ranks (GRADCOMM_FLIGHT_RECORDER_FILE, or
gcommCommDumpFlightRecord) and says, in words, where the ranks parted: which rank
never entered which collective, which ranks stopped where, and calls that differ
between ranks at the same sequence number; and what the ranks noted: membership
changes, and divergence checks that found a rank's bytes off the majority's.
Standard library only.

  python3 tools/gradcomm_desync.py /tmp/records/          every *.json in the folder
  python3 tools/gradcomm_desync.py rank0.json rank1.json ...

Exit status: 0 when the records agree and every rank completed its last call,
1 when they show a desync, a mismatch, a failure or a divergence, 2 on unreadable input.
"""
import argparse
import glob
import json
import os
import sys


def die(message):
    print(f"gradcomm_desync: {message}", file=sys.stderr)
    sys.exit(2)


def load(paths):
    records = {}
    for path in paths:
        try:
            with open(path) as f:
                rec = json.load(f)
        except (OSError, ValueError) as e:
            die(f"cannot read {path}: {e}")
        if rec.get("gradcomm_flight_record") != 1:
            die(f"{path} is not a gradcomm flight record")
        records[rec["rank"]] = rec
    return records


def is_p2p(e):
    """Sends and receives are numbered apart (p2p_seq): only two ranks take part."""
    return "p2p_seq" in e


def describe(e):
    """'all-reduce #5 (1024 f32, sum)' — what the ranks must agree on."""
    if is_p2p(e):
        way = "to" if e["op"] == "send" else "from"
        return f"{e['op']} #{e['p2p_seq']} ({e['count']} {e['dtype']} {way} rank {e['peer']})"
    parts = [f"{e['count']} {e['dtype']}"]
    if "redop" in e:
        parts.append(e["redop"])
    if "root" in e:
        parts.append(f"root {e['root']}")
    if e["op"] == "barrier":
        return f"barrier #{e['seq']}"
    return f"{e['op']} #{e['seq']} ({', '.join(parts)})"


def signature(e):
    return (e["op"], e["count"], e["dtype"], e.get("redop"), e.get("root"))


def ranks_text(ranks):
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def p2p_partner(records, rank, e):
    """' (rank 1 entered 2 receives from rank 0; this is send 3 to it)': whether
    the peer ever posted the other half of a send or receive that did not complete."""
    peer = e["peer"]
    other = "recv" if e["op"] == "send" else "send"
    mine = [x for x in records[rank]["entries"] if is_p2p(x) and x["op"] == e["op"] and x["peer"] == peer]
    index = next(i for i, x in enumerate(mine, 1) if x["p2p_seq"] == e["p2p_seq"])
    if peer not in records:
        return f" (no record from rank {peer})"
    theirs = sum(1 for x in records[peer]["entries"] if is_p2p(x) and x["op"] == other and x["peer"] == rank)
    noun = "receive(s)" if other == "recv" else "send(s)"
    way = "to" if e["op"] == "send" else "from"
    return (f" (rank {peer} entered {theirs} {noun} {'from' if other == 'recv' else 'to'} rank {rank}; this is "
            f"{e['op']} {index} {way} it in this rank's record)")


def report(records):
    """The report's lines and whether anything is wrong."""
    lines, wrong = [], False
    sizes = {r["size"] for r in records.values()}
    size = max(sizes)
    if len(sizes) > 1:
        lines.append(f"the records disagree on the job's size: {sorted(sizes)}")
        wrong = True
    missing = sorted(set(range(size)) - set(records))
    lines.append(f"job of {size} ranks ({next(iter(records.values()))['transport']} transport); records from "
                 f"{ranks_text(records)}" + (f"; none from {ranks_text(missing)} (frozen, killed, or never "
                                              "asked to write one)" if missing else ""))
    if missing:
        wrong = True

    by_seq = {}  # seq -> {rank: entry}, collectives only
    collectives = {rank: [e for e in rec["entries"] if not is_p2p(e)] for rank, rec in records.items()}
    for rank, entries in collectives.items():
        for e in entries:
            by_seq.setdefault(e["seq"], {})[rank] = e
    last_entered = {rank: rec["last_enqueued_seq"] for rank, rec in records.items()}
    oldest = {rank: (collectives[rank][0]["seq"] if collectives[rank] else rec["last_enqueued_seq"] + 1)
              for rank, rec in records.items()}

    # Calls that differ at one sequence number: the first is what went wrong.
    for seq in sorted(by_seq):
        seen = by_seq[seq]
        if len({signature(e) for e in seen.values()}) > 1:
            lines.append(f"collective #{seq} differs between ranks: " +
                         "; ".join(f"rank {r} called {describe(e)}" for r, e in sorted(seen.items())))
            wrong = True
            break

    # The furthest call any rank entered, and who never got there.
    front = max(last_entered.values())
    if front > 0:
        entered = [r for r, s in last_entered.items() if s >= front]
        behind = {r: s for r, s in last_entered.items() if s < front}
        call = describe(by_seq[front][entered[0]])
        if behind or missing:
            never = sorted(list(behind) + missing)
            lines.append(f"{call}: entered by {ranks_text(entered)}; never entered by {ranks_text(never)}")
            for r, s in sorted(behind.items()):
                last = by_seq.get(s, {}).get(r)
                if s == 0:
                    lines.append(f"rank {r} made no call")
                    continue
                lines.append(f"rank {r} stopped after {describe(last) if last else f'collective #{s}'}"
                             + (f" (its record starts at #{oldest[r]})" if s < oldest[r] else ""))
            wrong = True
        else:
            lines.append(f"every rank with a record entered {call}")

    # Failures, and calls that never completed. A healthy rank's dump on demand may
    # hold calls still in flight on the GPU: named, not counted as a fault.
    for r, rec in sorted(records.items()):
        pending = [e for e in rec["entries"] if e["state"] != "completed"]
        failed = bool(rec.get("failure"))
        if failed:
            lines.append(f"rank {r} failed: {rec['failure']}")
            wrong = True
        for e in pending:
            faulty = failed or e["state"] == "failed"
            lines.append(f"rank {r}: {describe(e)} {e['state'] if faulty else 'still in flight'}"
                         + (f" (reducer bucket {e['bucket']})" if "bucket" in e else "")
                         + (p2p_partner(records, r, e) if is_p2p(e) else ""))
            wrong = wrong or faulty
    # What the ranks noted besides their calls: membership changes (informational),
    # and divergence checks that found ranks off the majority (a finding).
    for r, rec in sorted(records.items()):
        for note in rec.get("notes", []):
            lines.append(f"rank {r} noted: {note['text']}")
            wrong = wrong or note["text"].startswith("divergence check:")
    if not wrong:
        in_flight = sum(e["state"] == "enqueued" for rec in records.values() for e in rec["entries"])
        lines.append("the records agree and every call completed" if not in_flight else
                     f"the records agree; {in_flight} call(s) still in flight when they were written")
    return lines, wrong


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="record files, or folders holding *.json records")
    args = ap.parse_args()
    files = []
    for p in args.paths:
        files.extend(sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p])
    if not files:
        die("no records found")
    lines, wrong = report(load(files))
    print("\n".join(lines))
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()

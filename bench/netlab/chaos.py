#!/usr/bin/env python3
"""The lab's chaos run (docs/fault-tolerance.md, issue 46): members of
examples/ft_train.c (or, with --member torch, bench/netlab/chaos_member.py: the
lab's MLP under gradcomm.torch's DDP wrapper with a membership, Adam) train on
shaped links (tools/netlab) while this supervisor
SIGKILLs a random member every MEAN seconds on average (exponential gaps, at
least --min-gap apart, none in the last --calm seconds) and, every --stop-every
events, SIGSTOPs one for --freeze seconds instead. bench/netlab/chaos_slot.sh
runs each member under a restart loop, so killed and refused members come back
as newcomers. Rank 0's namespace also holds gradcomm-store, in its own process,
which is never touched: killing the member that is rank 0 is survived like any.

  bench/netlab/chaos.py --out DIR [--ranks 3] [--rate 1gbit] [--steps N] ...

Writes DIR/events.tsv (what was done to whom, when), DIR/lab/ (each slot's log),
and DIR/report.md, read by bench/netlab/chaos_report.py. With --no-chaos the same
run goes undisturbed (the baseline the report compares with).
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def members():
    """(pid, name) of every running member, however deep in namespaces."""
    out = subprocess.run(["pgrep", "-a", "-f", "--", "--name slot"], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        pid, _, cmd = line.partition(" ")
        parts = cmd.split()
        if "--name" in parts and (parts[0].endswith("gradcomm_example_ft") or
                                  (len(parts) > 1 and parts[1].endswith("chaos_member.py"))):
            found.append((int(pid), parts[parts.index("--name") + 1]))
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--ranks", type=int, default=3)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--steps", type=int, default=2000, help="the job ends when it committed this many")
    p.add_argument("--minutes", type=float, default=10, help="the longest the run may take")
    p.add_argument("--mean", type=float, default=15, help="mean seconds between failures")
    p.add_argument("--min-gap", type=float, default=4)
    p.add_argument("--calm", type=float, default=45, help="no failure in the run's last seconds")
    p.add_argument("--stop-every", type=int, default=4, help="every Nth failure is a SIGSTOP")
    p.add_argument("--freeze", type=float, default=5, help="seconds a stopped member stays stopped")
    p.add_argument("--payload", type=int, default=16, help="MiB all-reduced per step besides the model")
    p.add_argument("--state-mib", type=int, default=64, help="MiB of state a newcomer receives")
    p.add_argument("--timeout", type=float, default=3, help="the members' GRADCOMM_TIMEOUT_S")
    p.add_argument("--quorum-timeout", type=float, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-chaos", action="store_true")
    p.add_argument("--member", choices=["c", "torch"], default="c",
                   help="examples/ft_train.c, or the lab's MLP in PyTorch (bench/netlab/chaos_member.py)")
    p.add_argument("--python", default=os.environ.get("GRADCOMM_TORCH_PYTHON", "python3"),
                   help="a Python with PyTorch and gradcomm installed (--member torch)")
    p.add_argument("--expected-seconds", type=float, default=0,
                   help="how long the undisturbed run took (failures stop --calm s before that)")
    a = p.parse_args()

    os.makedirs(a.out, exist_ok=True)
    lab = os.path.join(a.out, "lab")
    # The programs the run uses, copied: a build during the run (or a restart that
    # would load a rebuilt library) cannot change them. Not results: DIR/bin.
    bin_dir = os.path.join(a.out, "bin")
    for sub_dir, name in (("tools", "gradcomm-store"), ("examples", "gradcomm_example_ft"), (".", "libgradcomm.so.0")):
        os.makedirs(os.path.join(bin_dir, sub_dir), exist_ok=True)
        shutil.copy2(os.path.join(a.build, sub_dir, name), os.path.join(bin_dir, sub_dir, name))
    deadline = int(time.time() + a.minutes * 60)
    member_args = ["--min-ranks", str(a.ranks), "--steps", str(a.steps), "--timeout", str(a.timeout),
                   "--quorum-timeout", str(a.quorum_timeout), "--check", "10", "--log-steps", "--transport", "socket"]
    env = []
    if a.member == "c":
        member_args += ["--payload", str(a.payload), "--state-mib", str(a.state_mib)]
    else:  # the member and the lab's model, copied as the programs are
        for name in ("chaos_member.py", "wire_train.py"):
            shutil.copy2(os.path.join(HERE, name), os.path.join(bin_dir, name))
        env = ["--env", f"CHAOS_MEMBER={a.python} {os.path.abspath(os.path.join(bin_dir, 'chaos_member.py'))}"]
    cmd = [sys.executable, os.path.join(ROOT, "tools", "netlab"), "run", "--ranks", str(a.ranks), "--rate", a.rate,
           "--timeout", str(a.minutes * 60 + 120), "--logdir", lab, "--env", f"CHAOS_DIR={a.out}",
           "--env", f"LD_LIBRARY_PATH={os.path.abspath(bin_dir)}", *env, "--",
           "bash", os.path.join(HERE, "chaos_slot.sh"), os.path.abspath(bin_dir), str(deadline)] + member_args
    started = time.time()
    lab_run = subprocess.Popen(cmd)
    rng = random.Random(a.seed)
    events = open(os.path.join(a.out, "events.tsv"), "w")
    events.write("unix_time\tevent\tpid\tmember\n")
    count = 0
    calm_from = started + (a.expected_seconds or a.minutes * 60) - a.calm
    next_at = started + max(a.min_gap, rng.expovariate(1.0 / a.mean)) + 5  # let the job start
    stopped = []  # (wake_at, pid, name)
    while lab_run.poll() is None:
        now = time.time()
        for item in [s for s in stopped if s[0] <= now]:
            os.kill(item[1], signal.SIGCONT)
            events.write(f"{now:.3f}\tsigcont\t{item[1]}\t{item[2]}\n")
            stopped.remove(item)
        if not a.no_chaos and now >= next_at and now < calm_from:
            live = [m for m in members() if m[0] not in [s[1] for s in stopped]]
            if len(live) == a.ranks:  # only a whole job is struck: one failure at a time
                pid, name = rng.choice(live)
                count += 1
                if count % a.stop_every == 0:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append((now + a.freeze, pid, name))
                    events.write(f"{now:.3f}\tsigstop\t{pid}\t{name}\n")
                else:
                    os.kill(pid, signal.SIGKILL)
                    events.write(f"{now:.3f}\tsigkill\t{pid}\t{name}\n")
                events.flush()
                next_at = now + max(a.min_gap, rng.expovariate(1.0 / a.mean))
        time.sleep(0.05)
    for _, pid, name in stopped:
        os.kill(pid, signal.SIGCONT)
    events.write(f"{time.time():.3f}\tend\t0\tlab exit {lab_run.returncode}\n")
    events.close()
    print(f"chaos run: {count} failures in {time.time() - started:.0f} s; lab exit {lab_run.returncode}; "
          f"logs in {a.out}")
    return lab_run.returncode


if __name__ == "__main__":
    sys.exit(main())

"""tools/netlab: shaped links in network namespaces, its refusals and its cleanup on
every way a run can end, and a smoke run of the wire comparison (bench/netlab) on
2 ranks at 1 Gbit. Skips, with the reason, where namespaces cannot be created."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.environ.get("GRADCOMM_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NETLAB = os.path.join(ROOT, "tools", "netlab")


def _namespaces_work():
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    name = f"gcnlcheck{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


_why_not = _namespaces_work()
needs_netns = pytest.mark.skipif(_why_not is not None, reason=f"netlab: {_why_not}")


def netlab(*args, timeout=120, env=None, **kw):
    return subprocess.run([sys.executable, NETLAB, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, **kw)


def leftovers(name, marker=None):
    """Namespaces of lab `name` still present, and processes whose command line holds `marker`."""
    ns = [line.split()[0] for line in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                     text=True).stdout.splitlines()
          if line.startswith(f"{name}-")]
    procs = []
    if marker:
        procs = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return ns, procs


def wait_for(path, text, seconds=30):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path) and text in open(path).read():
            return True
        time.sleep(0.1)
    return False


@needs_netns
def test_ranks_get_torchrun_variables_and_reach_each_other(tmp_path):
    # Rank 1 listens, rank 0 connects to it through the lab: the addresses route.
    script = ("import os, socket, time\n"
              "r = int(os.environ['RANK'])\n"
              "print('env', r, os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'], os.environ['MASTER_ADDR'],"
              " os.environ['MASTER_PORT'], os.environ['GLOO_SOCKET_IFNAME'], os.environ['NETLAB_ADDR'], flush=True)\n"
              "if r == 1:\n"
              "    s = socket.create_server(('0.0.0.0', 5555)); c, _ = s.accept(); print('got', c.recv(5).decode())\n"
              "else:\n"
              "    for _ in range(100):\n"
              "        try: c = socket.create_connection(('198.18.0.2', 5555)); break\n"
              "        except OSError: time.sleep(0.1)\n"
              "    c.sendall(b'hello')\n")
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--no-probe", "--name", "gctenv", "--logdir", str(tmp_path),
               "--", sys.executable, "-c", script)
    assert r.returncode == 0, r.stderr
    log0, log1 = (tmp_path / "rank0.log").read_text(), (tmp_path / "rank1.log").read_text()
    assert "env 0 2 0 198.18.0.1 29500 lab0 198.18.0.1" in log0
    assert "env 1 2 0 198.18.0.1 29500 lab0 198.18.0.2" in log1
    assert "got hello" in log1
    assert "[rank 1] got hello" in r.stderr
    assert leftovers("gctenv") == ([], [])


@needs_netns
def test_the_link_is_shaped_and_the_held_rate_printed(tmp_path):
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--name", "gctrate", "--logdir", str(tmp_path), "--", "true")
    assert r.returncode == 0, r.stderr
    words = (tmp_path / "link.txt").read_text().split()
    held = float(dict(zip(words[::2], words[1::2]))["held_gbit"])
    # An unshaped veth pair carries several Gbit/s here; the token bucket holds it
    # to the rate (TCP's payload is ~95% of the wire's bytes).
    assert 0.3 < held <= 1.0, r.stderr
    assert "holds" in r.stderr and "Gbit/s" in r.stderr


@needs_netns
def test_a_failing_rank_stops_the_others_and_cleans_up(tmp_path):
    marker = f"netlab-fail-{os.getpid()}"
    cmd = f"if [ $RANK = 1 ]; then exit 3; fi; exec sleep 300 # {marker}"
    t0 = time.monotonic()
    r = netlab("run", "--ranks", "3", "--rate", "1gbit", "--no-probe", "--grace", "1", "--name", "gctfail",
               "--logdir", str(tmp_path), "--", "sh", "-c", cmd)
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - t0 < 60
    assert "rank 1 exited with 3" in r.stderr
    assert leftovers("gctfail", marker) == ([], [])


@needs_netns
def test_a_timeout_exits_124_and_cleans_up(tmp_path):
    marker = f"netlab-timeout-{os.getpid()}"
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--no-probe", "--timeout", "2", "--name", "gcttime",
               "--logdir", str(tmp_path), "--", "sh", "-c", f"exec sleep 300 # {marker}")
    assert r.returncode == 124, r.stderr
    assert "timeout" in r.stderr
    assert leftovers("gcttime", marker) == ([], [])


@needs_netns
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_netlab_removes_everything(tmp_path, sig):
    marker = f"netlab-sig-{os.getpid()}-{int(sig)}"
    p = subprocess.Popen([sys.executable, NETLAB, "run", "--ranks", "2", "--rate", "1gbit", "--no-probe",
                          "--name", "gctsig", "--logdir", str(tmp_path), "--", "sh", "-c",
                          f"echo started; exec sleep 300 # {marker}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(tmp_path / "rank1.log", "started") and wait_for(tmp_path / "rank0.log", "started")
    assert leftovers("gctsig", marker)[0], "the lab should exist while the ranks run"
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert leftovers("gctsig", marker) == ([], [])


@needs_netns
def test_a_killed_run_is_refused_next_time_until_cleanup(tmp_path):
    marker = f"netlab-kill-{os.getpid()}"
    p = subprocess.Popen([sys.executable, NETLAB, "run", "--ranks", "2", "--rate", "1gbit", "--no-probe",
                          "--name", "gctkill", "--logdir", str(tmp_path), "--", "sh", "-c",
                          f"echo started; exec sleep 300 # {marker}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(tmp_path / "rank0.log", "started")
        p.kill()  # SIGKILL: netlab cannot clean up
        p.wait()
        ns, _ = leftovers("gctkill")
        assert sorted(ns) == ["gctkill-hub", "gctkill-r0", "gctkill-r1"]
        r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--name", "gctkill", "--", "true")
        assert r.returncode == 2
        assert "tools/netlab cleanup --name gctkill" in r.stderr
    finally:
        r = netlab("cleanup", "--name", "gctkill")
    assert r.returncode == 0 and "removed 3 namespace(s)" in r.stderr
    assert leftovers("gctkill", marker) == ([], [])


@needs_netns
def test_refusals(tmp_path):
    r = netlab("run", "--ranks", "2", "--rate", "fast", "--", "true")
    assert r.returncode == 2 and "'fast' is not a rate" in r.stderr
    r = netlab("run", "--ranks", "1", "--rate", "1gbit", "--", "true")
    assert r.returncode == 2 and "--ranks 1" in r.stderr
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--name", "gctnone")
    assert r.returncode == 2 and "no command" in r.stderr
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--name", "Bad_Name", "--", "true")
    assert r.returncode == 2 and "--name 'Bad_Name'" in r.stderr
    # tc missing: a PATH with ip only.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(shutil.which("ip"), bindir / "ip")
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--", "true", env=dict(os.environ, PATH=str(bindir)))
    assert r.returncode == 2 and "'tc' is not installed" in r.stderr
    # Not root: the same script run as nobody.
    tmp = tempfile.mkdtemp()
    os.chmod(tmp, 0o755)
    copy = os.path.join(tmp, "netlab")
    shutil.copy(NETLAB, copy)
    os.chmod(copy, 0o755)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, copy, "run",
                        "--ranks", "2", "--rate", "1gbit", "--", "true"], capture_output=True, text=True, timeout=60)
    shutil.rmtree(tmp)
    assert r.returncode == 2 and "netlab needs root" in r.stderr, r.stderr


@needs_netns
def test_wire_comparison_smoke(tmp_path):
    """bench/netlab on 2 ranks at 1 Gbit, a few steps of each kind of variant, and its report."""
    run = tmp_path / "mlp-1gbit-w2"
    r = netlab("run", "--ranks", "2", "--rate", "1gbit", "--name", "gctsmoke", "--logdir", str(run),
               "--probe-seconds", "1", "--env", "OMP_NUM_THREADS=1", "--",
               sys.executable, os.path.join(ROOT, "bench", "netlab", "wire_train.py"), "--model", "mlp",
               "--variants", "ddp_f32,gc_f32,gc_int8,ddp_psgd1,gc_psgd1,gc_f32@2", "--rounds", "1", "--steps", "3",
               "--warmup", "3", "--out", str(run), timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads((run / "rank0.json").read_text())
    for v in ("ddp_f32", "gc_f32", "gc_int8", "ddp_psgd1", "gc_psgd1", "gc_f32@2"):
        assert len(doc["variants"][v]["losses"]) == 6
        timed = doc["variants"][v]["blocks"][1]
        assert timed["steps"] == 3 and timed["tx_bytes"] > 0
    # The compressed wires send fewer bytes than f32 (read from the interface).
    sent = {v: doc["variants"][v]["blocks"][1]["tx_bytes"] for v in doc["variants"]}
    assert sent["gc_int8"] < 0.5 * sent["gc_f32"]
    assert sent["gc_psgd1"] < 0.5 * sent["gc_f32"] and sent["ddp_psgd1"] < 0.5 * sent["ddp_f32"]
    rep = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "netlab", "report.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert "| gc_int8 |" in rep.stdout and "x ddp_f32" in rep.stdout
    assert "| gc_f32@2 |" in rep.stdout  # a variant with its own bucket size, against its peer
    assert (tmp_path / "loss-1gbit.png").stat().st_size > 1000
    assert leftovers("gctsmoke") == ([], [])

"""Issue 19 with ranks as processes (the socket transport): a rank that freezes,
and a rank that is killed, mid-job. The survivors' flight records, written at
their failure to GRADCOMM_FLIGHT_RECORDER_FILE, name the collective and the
missing rank, and tools/gradcomm_desync.py says so in words."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESYNC = os.path.join(ROOT, "tools", "gradcomm_desync.py")

RANK = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import gradcomm
    rank, world, port, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    c = gradcomm.init(rank, world, master_port=port, timeout=3)
    x = np.ones(64, dtype=np.float32)
    for k in range(3):
        c.all_reduce(x, op="sum")
    if rank == world - 1:
        if mode == "killed":
            os._exit(9)          # dies without a word
        time.sleep(30)           # frozen: never enters the fourth call
        sys.exit(0)
    try:
        c.all_reduce(x, op="sum")
        print("the fourth all-reduce completed", flush=True)
        sys.exit(1)
    except gradcomm.Error as e:
        print("failed as expected:", e, flush=True)
        sys.exit(0)
""")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("mode", ["frozen", "killed"])
def test_survivors_records_name_the_missing_rank(tmp_path, mode):
    world, port = 3, free_port()
    env = dict(os.environ, GRADCOMM_FLIGHT_RECORDER_FILE=str(tmp_path / "rank%r.json"))
    env.pop("GRADCOMM_DEBUG_FILE", None)
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(world), str(port), mode], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    try:
        outs = [p.communicate(timeout=None if r == world - 1 else 60)[0] if r < world - 1 else None
                for r, p in enumerate(procs)]
    finally:
        procs[-1].kill()
        procs[-1].wait()
    for r in range(world - 1):
        assert procs[r].returncode == 0, outs[r]
        assert (tmp_path / f"rank{r}.json").exists(), outs[r]
    assert not (tmp_path / f"rank{world - 1}.json").exists()  # it never failed: it froze or died
    report = subprocess.run([sys.executable, DESYNC, str(tmp_path)], capture_output=True, text=True)
    assert report.returncode == 1, report.stdout + report.stderr
    text = report.stdout
    assert "records from ranks 0, 1; none from rank 2" in text, text
    assert "all-reduce #4 (64 f32, sum): entered by ranks 0, 1; never entered by rank 2" in text, text
    assert "shm transport" in text, text  # processes of one host: gcommTransportAuto's choice


def test_the_desync_tool_names_a_divergence_from_the_records(tmp_path):
    """A divergence check that finds a rank off the majority is noted in every rank's
    flight record; tools/gradcomm_desync.py reads it and exits 1."""
    import threading

    import numpy as np

    import gradcomm
    comms = gradcomm.init_local(3)
    arrays = [np.arange(1000, dtype=np.float32) for _ in comms]
    arrays[2][7] += 1  # rank 2 drifted
    threads = [threading.Thread(target=c.check_divergence, args=([a],)) for c, a in zip(comms, arrays)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, c in enumerate(comms):
        c.dump_flight_record(tmp_path / f"rank{r}.json")
        c.close()
    out = subprocess.run([sys.executable, DESYNC, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("rank 0 noted: divergence check: 1 of 1 span(s) differ between ranks; off the majority: rank 2 from "
            "span 0") in out.stdout, out.stdout

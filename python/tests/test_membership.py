"""gradcomm.Membership across real processes (ft_worker.py, numpy, the socket or shm
transport chosen by the table): a member killed at step 20, rank 0 included, costs
the job one step; the survivors end with one parameter hash; a restarted process
joins and ends identical. The server runs in this test's process
(gradcomm.StoreServer), apart from every member."""
import json
import os
import subprocess
import sys
import time

import pytest

import gradcomm

HERE = os.path.dirname(os.path.abspath(__file__))


def members(server, n, *args, late=0, late_after=0.3, timeout=120, worker="ft_worker.py", own=lambda i: []):
    """n member processes of `worker` (then `late` more, late_after seconds later),
    the i-th with the extra arguments own(i); [(exit code, output, last JSON line)]."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GRADCOMM_STORE"):
        env.pop(var, None)
    cmd = [sys.executable, os.path.join(HERE, worker), "--store", f"127.0.0.1:{server.port}", *args]

    def start(i):
        return subprocess.Popen(cmd + own(i), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    procs = [start(i) for i in range(n)]
    if late:
        time.sleep(late_after)
        procs += [start(n + i) for i in range(late)]
    out = []
    for p in procs:
        text, _ = p.communicate(timeout=timeout)
        final = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        out.append((p.returncode, text, final[-1] if final else None))
    return out


@pytest.mark.parametrize("die", ["20:0", "20:2"])
def test_a_killed_member_costs_one_step_and_the_others_end_identical(die):
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        out = members(server, 3, "--die", die)
    killed = [o for o in out if o[0] == -9]
    done = [o for o in out if o[0] == 0]
    assert len(killed) == 1 and len(done) == 2, "\n".join(text for _, text, _ in out)
    assert {d[2]["params"] for d in done} == {done[0][2]["params"]}
    for _, text, final in done:
        assert final["steps"] == 60 and final["world"] == 2, text
        assert final["stats"]["steps_discarded"] == 1 and final["stats"]["failures_survived"] == 1, text
        assert "lost its connection to the store: did its process die?" in text, text


def test_a_restarted_member_joins_receives_the_state_and_ends_identical():
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        out = members(server, 3, "--steps", "300", "--step-ms", "5", "--die", "10:1", late=1, late_after=1.0)
    done = [o for o in out if o[0] == 0]
    assert len(done) == 3, "\n".join(text for _, text, _ in out)
    assert len({d[2]["params"] for d in done}) == 1, "\n".join(text for _, text, _ in out)
    restarted = out[3][2]
    assert restarted["stats"]["state_bytes_received"] == 32 * 4, out[3][1]
    assert restarted["stats"]["failures_survived"] == 0, out[3][1]


def test_bad_arguments_are_refused_naming_what_is_wrong(monkeypatch):
    monkeypatch.delenv("GRADCOMM_STORE", raising=False)
    with pytest.raises(gradcomm.InvalidArgumentError, match="set config.store or GRADCOMM_STORE"):
        gradcomm.Membership()
    with pytest.raises(gradcomm.InvalidArgumentError, match="must be host:port"):
        gradcomm.Membership(store="nowhere")
    with pytest.raises(gradcomm.InvalidArgumentError, match="the MPI transport cannot serve"):
        gradcomm.Membership(store="127.0.0.1:1", transport="mpi")
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        with gradcomm.Membership(store=f"127.0.0.1:{server.port}", job_key="bad") as m:
            with pytest.raises(gradcomm.InvalidStateError, match="call quorum"):
                m.sync_state([])
            with pytest.raises(gradcomm.InvalidStateError, match="call gcommMembershipQuorum first"):
                m.commit(True)

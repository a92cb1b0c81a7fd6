"""gradcomm.torch.DistributedDataParallel(membership=...) across real processes
(examples/ft_train_torch.py: an MLP with a BatchNorm, Adam, a step LR schedule,
each member started from its own seed): a member killed inside its backward pass costs
the job one step and the survivors end with one model and one optimizer state;
an int8 job shrinks with its survivors' residuals carried; a restarted member
joins and receives the parameters, the optimizer's, the scheduler's and
PowerSGD's state; and what the wrapper refuses with a membership."""
import os

import pytest
import torch

import gradcomm
import gradcomm.torch as gct
from test_membership import members

SOURCE = os.environ.get("GRADCOMM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.abspath(os.path.join(SOURCE, "examples", "ft_train_torch.py"))


def run(n, *args, late=0, late_after=0.5, timeout=240):
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        return members(server, n, "--json", *args, late=late, late_after=late_after, timeout=timeout,
                       worker=EXAMPLE, own=lambda i: ["--seed", str(i)])


def agree(done, key):
    return len({d[2][key] for d in done}) == 1


@pytest.mark.parametrize("die,compression,amp", [("10:0", "none", False), ("10:1", "int8", False),
                                                  ("10:2", "none", True)])
def test_a_member_killed_in_backward_costs_one_step_and_the_survivors_agree(die, compression, amp):
    out = run(3, "--steps", "40", "--die", die, "--compression", compression, *(["--amp"] if amp else []))
    log = "\n".join(text[-3000:] for _, text, _ in out)
    killed = [o for o in out if o[0] == -9]
    done = [o for o in out if o[0] == 0]
    assert len(killed) == 1 and len(done) == 2, log
    for key in ("params", "optimizer", "lr", "scale"):
        assert agree(done, key), f"{key} differ\n{log}"
    for _, text, final in done:
        assert final["steps"] == 40 and final["world"] == 2 and final["compression"] == compression, text
        assert final["stats"]["steps_discarded"] == 1 and final["stats"]["failures_survived"] == 1, text


def test_a_restarted_member_receives_model_optimizer_scheduler_scaler_and_powersgd_state():
    out = run(3, "--steps", "60", "--final-world", "3", "--die", "10:1", "--compression", "powersgd", "--amp",
              late=1, late_after=1.0)
    log = "\n".join(text[-3000:] for _, text, _ in out)
    done = [o for o in out if o[0] == 0]
    assert len(done) == 3, log
    for key in ("params", "optimizer", "lr", "scale", "shared", "steps"):
        assert agree(done, key), f"{key} differ\n{log}"
    newcomer = out[3]
    assert newcomer[2]["stats"]["state_bytes_received"] > 0 and newcomer[2]["world"] == 3, newcomer[1]
    assert newcomer[2]["loss"] < 0.5, "the newcomer trains the job's model, not its own fresh one\n" + newcomer[1]


def test_what_a_membership_refuses(monkeypatch):
    net = torch.nn.Linear(4, 2)
    (comm,) = gradcomm.init_local(1, "cpu")
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        with gradcomm.Membership(store=f"127.0.0.1:{server.port}", job_key="refusals") as m:
            with pytest.raises(gradcomm.InvalidArgumentError, match="give comm or membership, not both"):
                gct.DistributedDataParallel(net, comm, membership=m)
            with pytest.raises(gradcomm.InvalidArgumentError, match="gradient_as_bucket_view cannot be used"):
                gct.DistributedDataParallel(net, membership=m, gradient_as_bucket_view=True)
            with pytest.raises(gradcomm.InvalidArgumentError, match="must be a gradcomm.Membership"):
                gct.DistributedDataParallel(net, membership="host:1")
            model = gct.DistributedDataParallel(net, membership=m)
            with pytest.raises(gradcomm.InvalidStateError, match="opens with start_step"):
                model(torch.randn(3, 4))
            with pytest.raises(gradcomm.InvalidStateError, match="commit\\(\\) without start_step"):
                model.commit()
            step = model.start_step()
            assert (step.index, step.rank, step.world_size, step.changed) == (0, 0, 1, True)
            with pytest.raises(gradcomm.InvalidStateError, match="again before commit"):
                model.start_step()
            with pytest.raises(gradcomm.InvalidStateError, match="before the first start_step"):
                gct.GradScaler(model)
            with pytest.raises(gradcomm.InvalidStateError, match="join\\(\\) cannot be used with a membership"):
                with model.join():
                    pass
            with pytest.raises(gradcomm.InvalidStateError, match="no_sync\\(\\) with a membership is not built"):
                with model.no_sync():
                    pass
            model(torch.randn(3, 4)).sum().backward()
            assert model.commit() and model.committed_steps == 1
            assert not model.start_step().changed
            model.close()
    plain = gct.DistributedDataParallel(torch.nn.Linear(4, 2), comm)
    with pytest.raises(gradcomm.InvalidStateError, match="for a wrapper made with membership="):
        plain.start_step()
    plain.close()
    comm.close()


def test_the_launch_recipe_restarts_only_the_killed_member():
    """examples/run_fault_tolerant.sh with the PyTorch member: gradcomm-store in its
    own process, each member under its own restart loop; the member killed at step
    10 is restarted alone, joins the running job, receives the model, Adam's and
    PowerSGD's state and ends with the others (docs/fault-tolerance.md, "Launching")."""
    import subprocess
    import sys
    store = os.path.join(os.environ.get("GRADCOMM_BIN_DIR", ""), "gradcomm-store")
    if not os.path.exists(store):
        pytest.skip(f"no gradcomm-store at {store} (tools/python_tests.sh sets GRADCOMM_BIN_DIR)")
    env = dict(os.environ, OMP_NUM_THREADS="1", FT_TIMEOUT="240")
    r = subprocess.run(["bash", os.path.join(SOURCE, "examples", "run_fault_tolerant.sh"), "3", store, sys.executable,
                        EXAMPLE, "--min-ranks", "3", "--steps", "60", "--final-world", "3", "--die", "10:1",
                        "--compression", "powersgd"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "3 finished, 1 restart(s), 1 distinct parameter hash" in r.stdout, \
        r.stdout[-4000:] + r.stderr[-2000:]
    import re
    assert "restart 1" in r.stdout and re.search(r"rank \d of 3: .* state received [1-9]\d* bytes", r.stdout), \
        r.stdout[-4000:]


def test_a_discarded_step_puts_the_loss_scale_back():
    """The scale rule runs at the end of backward; a step discarded after it (another
    member failed) must not keep its scale change, or members would disagree."""
    net = torch.nn.Linear(4, 2)
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        with gradcomm.Membership(store=f"127.0.0.1:{server.port}", job_key="scale") as m:
            model = gct.DistributedDataParallel(net, membership=m)
            scaler = gct.GradScaler(model, init_scale=8.0, growth_interval=1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model.start_step(opt)
            scaler.scale(model(torch.randn(3, 4)).sum()).backward()
            assert scaler.get_scale() == 16.0, "the rule ran at the end of backward"
            model._fail_step(gradcomm.InvalidStateError("gcommInvalidState", "injected: a member failed"))
            assert not model.commit()
            assert scaler.get_scale() == 8.0 and scaler._get_growth_tracker() == 0
            step = model.start_step(opt)
            assert step.changed and step.index == 0
            scaler.scale(model(torch.randn(3, 4)).sum()).backward()
            assert model.commit() and scaler.get_scale() == 16.0
            scaler.step(opt)
            scaler.update()
            model.close()


def test_the_divergence_check_follows_the_jobs_step_and_a_lost_state_is_refused(monkeypatch):
    """The check runs at the job's steps K, 2K, ... (every member shares them; a
    newcomer's own count of forwards would not), once a step. A member told it holds
    the state after steps committed, that never held it (every holder gone while it
    caught up), is refused instead of training on a state that is not the job's."""
    from gradcomm.membership import View
    net = torch.nn.Linear(4, 2)
    with gradcomm.StoreServer(host="127.0.0.1") as server:
        with gradcomm.Membership(store=f"127.0.0.1:{server.port}", job_key="check") as m:
            model = gct.DistributedDataParallel(net, membership=m, divergence_check_every=2)
            checked = []
            real = model.check_divergence
            monkeypatch.setattr(model, "check_divergence", lambda **kw: checked.append(model._step.index) or real(**kw))
            for _ in range(5):
                model.start_step()
                model(torch.randn(3, 4))
                model(torch.randn(3, 4)).sum().backward()  # a second forward in the step: no second check
                assert model.commit()
            assert checked == [2, 4]
            view = m.quorum()
            model._leave_generation()
            model._holds_state = False
            with pytest.raises(gradcomm.InvalidStateError, match="the job's state is lost"):
                model._enter_generation(View(view.communicator, view.generation, 0, 1, True, 1, 7), None, None)
            model.close()

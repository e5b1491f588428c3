"""aiayn's Adam against torch.optim.Adam(fused=True): the same updates bit for bit, state dicts that move
both ways, clear errors for a state of another model; and why it exists: a training process that never
imports torch._dynamo (checked in a fresh process)."""

import subprocess
import sys

import pytest
import torch

from aiayn.checkpoint import CheckpointError
from aiayn.training.adam import Adam
from aiayn.training.schedule import lr_scheduler

HYPER = {"betas": (0.9, 0.98), "eps": 1e-9}


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 32), torch.nn.LayerNorm(32))


def _train(model, optimizer, steps, seed=1, lrs=None):
    """steps updates on random batches, the lr set before each (as the schedule does)."""
    gen = torch.Generator().manual_seed(seed)
    for n in range(steps):
        optimizer.param_groups[0]["lr"] = lrs[n] if lrs else 1e-2
        x = torch.randint(0, 50, (8, 5), generator=gen)
        model(x).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()


def _same(a, b):
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


def test_updates_are_torch_fused_adams_bit_for_bit():
    ours, theirs = _model(), _model()
    lrs = [1e-3 * (n + 1) for n in range(7)]
    _train(ours, Adam(params=ours.parameters(), lr=0.0, **HYPER), 7, lrs=lrs)
    _train(theirs, torch.optim.Adam(theirs.parameters(), lr=0.0, fused=True, **HYPER), 7, lrs=lrs)
    _same(ours, theirs)


def test_state_dicts_move_both_ways():
    """3 updates in one optimizer, its state loaded into the other kind, 3 more: as 6 in torch's."""
    reference = _model()
    ref_opt = torch.optim.Adam(reference.parameters(), lr=1e-2, fused=True, **HYPER)
    _train(reference, ref_opt, 3)
    _train(reference, ref_opt, 3, seed=2)
    for first, second in ((torch.optim.Adam, Adam), (Adam, torch.optim.Adam)):
        model = _model()
        make = {Adam: lambda m: Adam(params=m.parameters(), lr=1e-2, **HYPER),
                torch.optim.Adam: lambda m: torch.optim.Adam(m.parameters(), lr=1e-2, fused=True, **HYPER)}
        opt = make[first](model)
        _train(model, opt, 3)
        saved = opt.state_dict()
        opt = make[second](model)
        opt.load_state_dict(saved)
        _train(model, opt, 3, seed=2)
        _same(model, reference)


def test_the_saved_hyperparameters_win_as_in_torch():
    model = _model()
    opt = Adam(params=model.parameters(), lr=1e-2, betas=(0.5, 0.5), eps=1.0)
    opt.load_state_dict(Adam(params=model.parameters(), lr=3e-4, **HYPER).state_dict())
    assert opt.param_groups[0]["betas"] == (0.9, 0.98) and opt.param_groups[0]["eps"] == 1e-9


def test_a_state_of_another_model_is_refused_and_nothing_changes():
    model = _model()
    opt = Adam(params=model.parameters(), lr=1e-2, **HYPER)
    _train(model, opt, 1)
    before = {k: v.clone() for k, v in opt.state[model[1].weight].items()}
    other = torch.nn.Linear(16, 32)
    other_opt = Adam(params=other.parameters(), lr=1e-2, **HYPER)
    _train(torch.nn.Sequential(torch.nn.Embedding(50, 16), other), other_opt, 1)
    with pytest.raises(CheckpointError, match="saved for 2 parameters in 1 group.*this model has 5"):
        opt.load_state_dict(other_opt.state_dict())
    wrong = opt.state_dict()
    wrong["state"] = dict(wrong["state"])
    wrong["state"][1] = {**wrong["state"][1], "exp_avg": torch.zeros(3, 3)}
    with pytest.raises(CheckpointError, match=r"parameter 1 has shape \(32, 16\), its saved moments \(3, 3\)"):
        opt.load_state_dict(wrong)
    with pytest.raises(CheckpointError, match="damaged"):
        opt.load_state_dict({**opt.state_dict(), "state": {0: {"exp_avg": "garbage"}}})
    lr = opt.param_groups[0]["lr"]
    with pytest.raises(CheckpointError, match="damaged"):  # a group without eps: nothing changed, lr included
        group = {k: v for k, v in opt.state_dict()["param_groups"][0].items() if k != "eps"}
        opt.load_state_dict({"state": {}, "param_groups": [{**group, "lr": 9.0}]})
    assert opt.param_groups[0]["lr"] == lr
    for key, value in opt.state[model[1].weight].items():
        assert torch.equal(value, before[key])


def test_gradients_are_zeroed_in_place():
    model = _model()
    opt = Adam(params=model.parameters(), lr=1e-2, **HYPER)
    model(torch.tensor([[1, 2]])).sum().backward()
    grads = [p.grad for p in model.parameters()]
    opt.step()
    opt.zero_grad()
    assert all(p.grad is g and not g.any() for p, g in zip(model.parameters(), grads))


def test_the_schedule_resumes_from_a_lambdalr_state():
    """Checkpoints written before aiayn's schedule held LambdaLR's state_dict: its last_epoch is what counts."""
    model = _model()
    opt = Adam(params=model.parameters(), lr=0.0, **HYPER)
    old = torch.optim.lr_scheduler.LambdaLR(torch.optim.SGD(model.parameters(), lr=1.0), lambda s: (s + 1) / 10)
    for _ in range(4):
        old.optimizer.step()
        old.step()
    schedule = lr_scheduler(opt, "constant", d_model=16, warmup_steps=10, peak_lr=1.0)
    schedule.load_state_dict(old.state_dict())
    assert schedule.last_epoch == 4 and schedule.state_dict()["last_epoch"] == 4
    schedule.step()  # after update 5: update 6's rate, 6 / 10
    assert opt.param_groups[0]["lr"] == pytest.approx(0.6)


@pytest.mark.slow
def test_training_never_imports_dynamo(tmp_path):
    """torch.optim imports torch._dynamo (~70 MB) at its first call; aiayn's training, validation,
    checkpoints and averaging must not (a fresh process: pytest's has imported it already)."""
    from tests.training.test_training import TINY

    sets = [x for s in TINY + ["train.max_steps=6", "train.save_every=3", "train.eval_every=3",
                              "train.clip_norm=1.0"] for x in ("--set", s)]
    code = ("import sys; from aiayn.cli import main; rc = main(sys.argv[1:]); "
            "print('DYNAMO', 'torch._dynamo' in sys.modules); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, "train", "--out", str(tmp_path / "run"), *sets],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "DYNAMO False" in done.stdout

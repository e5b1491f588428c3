"""train.micro_batch_workers: each micro-batch dealt into shares that run in worker threads gives the update
the shares give one after another, nearly the whole batch's when nothing is random, and resumes exactly."""

import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import ExperimentConfig, load_config
from aiayn.errors import AiaynError
from aiayn.model import ModelConfig
from aiayn.training.micro_batches import check_micro_batch_workers, micro_batch_seed, split_batch
from aiayn.training.run import prepare_run
from tests.training.test_training import TINY, run_train, step_losses

SHORT = ["train.max_steps=6", "train.save_every=6", "train.eval_every=1000", "train.average_last=1",
         "train.num_threads=2"]


def final_weights(run, step=6):
    return load_file(str(run / f"checkpoints/step_{step:08d}/model.safetensors"))


def assert_same_run(a, b, step=6, tol=0.0):
    wa, wb = final_weights(a, step), final_weights(b, step)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=tol, atol=tol)
    la, lb = step_losses(a), step_losses(b)
    assert la.keys() == lb.keys()
    for k in la:
        assert la[k] == pytest.approx(lb[k], rel=tol, abs=tol)


class OneThreadAfterAnother:
    """MicroBatchWorkers' interface, the shares run one after another in the calling thread."""

    def __init__(self, *, workers: int, threads_per_worker: int):
        self.threads_per_worker = threads_per_worker

    def map(self, fn, items):
        threads = torch.get_num_threads()
        torch.set_num_threads(self.threads_per_worker)
        try:
            return [fn(item) for item in items]
        finally:
            torch.set_num_threads(threads)


def first_update(out, sets: list[str]) -> tuple[list[torch.Tensor], float]:
    """(gradients, summed loss) of a tiny model's first update of 2 micro-batches."""
    cfg = load_config(None, TINY + ["train.num_threads=2", "train.accumulate=2", *sets])
    threads = torch.get_num_threads()
    try:
        trainer = prepare_run(cfg, out)  # sets torch's thread count to train.num_threads
        loss, _, _ = trainer.train_step(trainer._next_group())
        return [p.grad.clone() for p in trainer.model.parameters() if p.requires_grad], loss
    finally:
        torch.set_num_threads(threads)


def test_shares_in_threads_equal_shares_one_after_another_bit_for_bit(tmp_path, monkeypatch):
    # one torch thread a share in both (a thread count may change a kernel's summation order)
    sets = ["train.micro_batch_workers=2", "model.dropout=0.3"]
    threads, loss_threads = first_update(tmp_path / "threads", sets)
    monkeypatch.setattr("aiayn.training.trainer.MicroBatchWorkers", OneThreadAfterAnother)
    sequential, loss_sequential = first_update(tmp_path / "sequential", sets)
    assert loss_threads == loss_sequential
    for a, b in zip(threads, sequential, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_workers_give_the_whole_batchs_update_without_dropout(tmp_path):
    # the same batches; only the sum of the shares' gradients is taken in another order. (Compared before
    # Adam: the attention's key bias has a zero gradient, rounding noise in both, which Adam's first
    # steps would blow up to +-lr.)
    whole, loss_whole = first_update(tmp_path / "whole", ["model.dropout=0.0"])
    shares, loss_shares = first_update(tmp_path / "workers", ["train.micro_batch_workers=2", "model.dropout=0.0"])
    assert loss_shares == pytest.approx(loss_whole, rel=1e-5)
    for a, b in zip(whole, shares, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_workers_train(tmp_path):
    run_train(tmp_path / "run", SHORT + ["train.micro_batch_workers=2", "model.dropout=0.3"])
    losses = step_losses(tmp_path / "run")
    assert losses[6] < losses[1]


def test_split_batch_deals_every_nth_sentence():
    assert split_batch([5, 6, 7, 8, 9], 2) == [[5, 7, 9], [6, 8]]
    assert split_batch([5], 2) == [[5]]  # no empty share
    assert split_batch(list(range(6)), 1) == [list(range(6))]


def test_workers_dropout_differs_between_micro_batches_and_steps():
    seeds = {micro_batch_seed(1, step, index) for step in range(50) for index in range(4)}
    assert len(seeds) == 200 and all(0 <= s < 2**63 for s in seeds)


@pytest.mark.slow
def test_workers_run_resumes_exactly(tmp_path):
    extra = SHORT[1:] + ["train.micro_batch_workers=2", "model.dropout=0.3", "train.save_every=3",
                         "train.accumulate=2"]
    run_train(tmp_path / "straight", extra + ["train.max_steps=12"])
    run_train(tmp_path / "resumed", extra + ["train.max_steps=6"])
    run_train(tmp_path / "resumed", extra + ["train.max_steps=12"])
    assert_same_run(tmp_path / "straight", tmp_path / "resumed", step=12)


@pytest.mark.parametrize("change, message", [
    (dict(arch="rnn"), "model.arch=rnn"),
    (dict(attention_dropout=0.1), "model.attention_dropout=0.1"),
])
def test_workers_refuse_what_they_cannot_keep_exact(change, message):
    cfg = ExperimentConfig(model=ModelConfig.preset("tiny"))
    cfg.train.micro_batch_workers = 2
    for key, value in change.items():
        setattr(cfg.model, key, value)
    with pytest.raises(AiaynError, match=message):
        check_micro_batch_workers(cfg, distributed=False, device=torch.device("cpu"))
    with pytest.raises(AiaynError, match="torchrun"):
        check_micro_batch_workers(ExperimentConfig(train=cfg.train), distributed=True, device=torch.device("cpu"))


def test_a_refused_setting_writes_nothing(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "aiayn", "train", "--out", str(out)]
    cmd += [x for s in TINY + ["train.micro_batch_workers=2", "model.attention_dropout=0.1"] for x in ("--set", s)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "train.micro_batch_workers=2: model.attention_dropout=0.1" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_workers_leave_the_training_threads_count():
    # in a fresh process: torch's process-wide count is what a worker's set_num_threads would change
    code = """if True:
        import torch
        from aiayn.training.micro_batches import MicroBatchWorkers
        torch.set_num_threads(2)
        workers = MicroBatchWorkers(workers=2, threads_per_worker=1)
        inside = workers.map(lambda _: torch.get_num_threads(), range(2))
        print(inside, torch.get_num_threads())
    """
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split("\n")[0] == "[1, 1] 2", result.stdout + result.stderr

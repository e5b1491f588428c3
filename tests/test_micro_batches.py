"""train.micro_batch_workers: an update's micro-batches in worker threads give the same update whatever the
number of workers, the same as one after another when nothing is random, and resume exactly."""

import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from aiayn.config import ExperimentConfig
from aiayn.errors import AiaynError
from aiayn.model import ModelConfig
from aiayn.training.micro_batches import check_micro_batch_workers, micro_batch_seed
from tests.test_training import TINY, run_train, step_losses

SHORT = ["train.max_steps=6", "train.save_every=6", "train.eval_every=1000", "train.average_last=1",
         "train.accumulate=2", "train.num_threads=2"]


def final_weights(run, step=6):
    return load_file(str(run / f"checkpoints/step_{step:08d}/model.safetensors"))


def assert_identical(a, b, step=6):
    wa, wb = final_weights(a, step), final_weights(b, step)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=0, atol=0)
    assert step_losses(a) == step_losses(b)


def test_two_workers_equal_one_bit_for_bit_with_dropout(tmp_path):
    # one torch thread a worker in both (a thread count may change a kernel's summation order)
    run_train(tmp_path / "one", SHORT + ["train.micro_batch_workers=1", "train.num_threads=1", "model.dropout=0.3"])
    run_train(tmp_path / "two", SHORT + ["train.micro_batch_workers=2", "model.dropout=0.3"])
    assert_identical(tmp_path / "one", tmp_path / "two")


def test_workers_equal_consecutive_micro_batches_without_dropout(tmp_path):
    # the gradients are summed in the order consecutive backward() calls would accumulate them
    run_train(tmp_path / "consecutive", SHORT + ["model.dropout=0.0", "train.num_threads=1"])
    run_train(tmp_path / "workers", SHORT + ["train.micro_batch_workers=2", "model.dropout=0.0"])
    assert_identical(tmp_path / "consecutive", tmp_path / "workers")


def test_workers_dropout_differs_between_micro_batches_and_steps():
    seeds = {micro_batch_seed(1, step, index) for step in range(50) for index in range(4)}
    assert len(seeds) == 200 and all(0 <= s < 2**63 for s in seeds)


def test_workers_run_resumes_exactly(tmp_path):
    extra = SHORT[1:] + ["train.micro_batch_workers=2", "model.dropout=0.3", "train.save_every=3"]
    run_train(tmp_path / "straight", extra + ["train.max_steps=12"])
    run_train(tmp_path / "resumed", extra + ["train.max_steps=6"])
    run_train(tmp_path / "resumed", extra + ["train.max_steps=12"])
    assert_identical(tmp_path / "straight", tmp_path / "resumed", step=12)


@pytest.mark.parametrize("change, message", [
    (dict(accumulate=1), "train.accumulate=1 gives each update fewer micro-batches than workers"),
    (dict(arch="rnn"), "model.arch=rnn"),
    (dict(attention_dropout=0.1), "model.attention_dropout=0.1"),
])
def test_workers_refuse_what_they_cannot_keep_exact(change, message):
    cfg = ExperimentConfig(model=ModelConfig.preset("tiny"))
    cfg.train.micro_batch_workers, cfg.train.accumulate = 2, 2
    for key, value in change.items():
        setattr(cfg.train if key == "accumulate" else cfg.model, key, value)
    with pytest.raises(AiaynError, match=message):
        check_micro_batch_workers(cfg, distributed=False, device=torch.device("cpu"))
    with pytest.raises(AiaynError, match="torchrun"):
        check_micro_batch_workers(ExperimentConfig(train=cfg.train), distributed=True, device=torch.device("cpu"))


def test_a_refused_setting_writes_nothing(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "aiayn", "train", "--out", str(out)]
    cmd += [x for s in TINY + ["train.micro_batch_workers=2"] for x in ("--set", s)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "train.micro_batch_workers=2: train.accumulate=1" in result.stderr
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

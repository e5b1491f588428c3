"""train.fp16: float16 autocast with loss scaling (aiayn/training/loss_scale.py), run on CPU autocast: its
losses follow float32 training, its loss scale survives a resume, an overflowing step is skipped, and it is
refused beside train.bf16."""

import json

import pytest
import torch

from aiayn.checkpoint import load_trainer_state
from aiayn.config import ConfigError
from aiayn.training.run import prepare_run
from tests.training.test_trainer_options import small_config

QUIET = ("train.eval_every=1000", "train.save_every=1000", "train.average_last=0")
# per-step training loss, max |fp16 - float32| over the tiny run's steps, measured: 2.3e-3 in 12 steps in the
# training thread, 1.1e-3 in 6 steps with 2 micro-batch workers (12 steps: also 1.1e-3; bf16 in the same runs:
# 1.8e-3 and 2.2e-3)
FP16_LOSS_TOLERANCE = 7e-3


def step_losses(out) -> list[float]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if "loss" in r]


@pytest.mark.parametrize(("path", "steps"), [("training thread", 12), ("micro-batch workers", 6)])
def test_fp16_losses_follow_float32(tmp_path, path, steps):
    """Steps of the tiny run (warmup 10, up to the lr's peak): each step's loss within the tolerance of
    float32's, and not equal to it (the matmuls did run in float16); the loss stays scaled (no overflow here).
    The workers' run is shorter: their threads make it the slowest on a busy 2-core machine."""
    extra = [f"train.max_steps={steps}", *QUIET]
    if path == "micro-batch workers":  # the gradients come from torch.autograd.grad of the scaled loss there
        extra += ["train.micro_batch_workers=2", "train.num_threads=2"]
    losses = {}
    for precision in ("fp32", "fp16"):
        trainer = prepare_run(small_config(*extra, f"train.fp16={precision == 'fp16'}"), tmp_path / precision)
        trainer.train()
        losses[precision] = step_losses(tmp_path / precision)
    assert trainer.loss_scale.scaler.get_scale() == 2.0**16  # no step overflowed: the initial scale
    assert len(losses["fp16"]) == len(losses["fp32"]) == steps
    diffs = [abs(a - b) for a, b in zip(losses["fp16"], losses["fp32"])]
    assert 0 < max(diffs) < FP16_LOSS_TOLERANCE, diffs


def test_fp16_scale_is_saved_and_restored_on_resume(tmp_path):
    """The scale (set apart from its initial 2^16 here) goes into trainer_state.pt and comes back when the
    same run resumes; a float32 run saves none."""
    extra = ("train.fp16=true", "train.max_steps=2", "train.save_every=2", "train.eval_every=1000")
    first = prepare_run(small_config(*extra), tmp_path)
    first.loss_scale.scaler.update(new_scale=1024.0)
    first.train()
    first.run_lock.close()
    saved = load_trainer_state(tmp_path / "checkpoints" / "step_00000002")["loss_scale"]
    assert saved["scale"] == 1024.0
    again = prepare_run(small_config(*extra), tmp_path)  # the same command: resumes from step 2
    assert again.progress.step == 2 and again.loss_scale.scaler.get_scale() == 1024.0
    plain = prepare_run(small_config("train.max_steps=1", *QUIET), tmp_path / "fp32")
    assert "loss_scale" not in plain.state_dict()


def test_fp16_overflowing_step_is_skipped_and_the_scale_backs_off(tmp_path):
    """A scale of 2^40 overflows float16's range (65504) in backward: the update is skipped (the weights stay
    as they were) and the scale halves, as torch.amp.GradScaler does; the step still counts."""
    trainer = prepare_run(small_config("train.fp16=true", "train.max_steps=1", *QUIET), tmp_path)
    trainer.loss_scale.scaler.update(new_scale=2.0**40)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    assert trainer.progress.step == 1 and trainer.loss_scale.scaler.get_scale() == 2.0**39
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def test_bf16_and_fp16_together_are_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        small_config("train.bf16=true", "train.fp16=true")
    message = str(err.value)
    assert "\n" not in message and "train.bf16" in message and "train.fp16" in message

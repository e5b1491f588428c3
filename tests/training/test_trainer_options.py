import json
import math

import pytest
import torch
from safetensors.torch import load_file

from aiayn.checkpoint import load_checkpoint
from aiayn.config import ConfigError, load_config
from aiayn.training.run import prepare_run
from tests.training.test_training import TINY


def small_config(*extra):
    return load_config(None, TINY + list(extra))


def test_early_stopping_keeps_the_best_by_dev_bleu(tmp_path):
    scores = iter([10.0, 20.0, 15.0, 12.0, 30.0, 40.0])
    cfg = small_config("train.max_steps=100", "train.eval_every=2", "train.save_every=100", "train.patience=2")
    trainer = prepare_run(cfg, tmp_path, bleu_factory=lambda tok, pairs, cfg: (lambda model: next(scores)))
    trainer.train()
    p = trainer.progress
    assert p.stopped_early and p.step == 8  # BLEU 10, 20 (best, step 4), 15, 12 -> patience 2 spent
    assert p.best_bleu == 20.0 and p.best_step == 4
    assert json.loads((tmp_path / "best" / "info.json").read_text())["step"] == 4
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["bleu"] for r in records if "bleu" in r] == [10.0, 20.0, 15.0, 12.0]
    assert all(r["valid_ppl"] > 1 for r in records if "valid_ppl" in r)
    # perplexity is exp of the NLL, not of the label-smoothed loss printed beside it
    assert all(abs(r["valid_ppl"] - math.exp(r["valid_nll"])) < 1e-6 * r["valid_ppl"] and
               r["valid_loss"] > r["valid_nll"] for r in records if "valid_ppl" in r)


def test_ema_weights_are_saved_and_loadable(tmp_path):
    cfg = small_config("train.max_steps=6", "train.eval_every=100", "train.save_every=3", "train.ema_decay=0.5")
    prepare_run(cfg, tmp_path).train()
    ckpt = tmp_path / "checkpoints" / "step_00000006"
    ema, raw = load_file(str(ckpt / "ema.safetensors")), load_file(str(ckpt / "model.safetensors"))
    shared = [k for k in raw if k in ema]
    assert shared and any(not torch.equal(ema[k].to(raw[k].dtype), raw[k]) for k in shared)
    model, _, _ = load_checkpoint(ckpt, use_ema=True)
    key = shared[0]
    torch.testing.assert_close(model.state_dict()[key], ema[key].to(raw[key].dtype))


def test_progress_bar_follows_the_time_budget():
    """With train.max_minutes the bar counts seconds of the budget (total and ETA true to the clock)."""
    from aiayn.training import progress_bar

    clock = iter([100.0, 130.0, 1000.0])
    bar = progress_bar.TrainingBar(max_steps=10**6, step=0, max_minutes=1.5, enabled=True, clock=lambda: next(clock))
    assert bar.bar.total == 90
    bar.advance(1)
    assert bar.bar.n == 30
    bar.advance(2)
    assert bar.bar.n == 90  # never past the budget
    steps = progress_bar.TrainingBar(max_steps=50, step=10, max_minutes=0, enabled=True)
    steps.advance(11)
    assert (steps.bar.total, steps.bar.n) == (50, 11)


def test_linear_schedule_reaches_zero_at_max_steps_and_a_time_stop_says_it_did_not(tmp_path):
    cfg = small_config("train.schedule=linear", "train.lr=1e-3", "train.warmup_steps=2", "train.max_steps=6",
                       "train.log_every=1", "train.eval_every=100", "train.save_every=100")
    trainer = prepare_run(cfg, tmp_path / "steps")
    trainer.train()
    lrs = [json.loads(line)["lr"] for line in (tmp_path / "steps" / "metrics.jsonl").read_text().splitlines()]
    assert lrs == [5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0]  # warmup to step 2, then down to 0 at step 6
    assert trainer.stop_reason == "reached train.max_steps=6"
    # a time budget that ends the run first: the stop line says the lr never reached 0 and what to change
    timed = prepare_run(small_config("train.schedule=linear", "train.lr=1e-3", "train.warmup_steps=2",
                                     "train.max_steps=1000", "train.max_minutes=1e-6"), tmp_path / "timed")
    timed.train()
    assert timed.stop_reason.startswith("reached train.max_minutes=1e-06 before step 1000, where train.schedule=linear")
    assert "lower train.max_steps to what fits in the time" in timed.stop_reason


def test_time_limit_is_one_decision_for_all_processes(tmp_path, monkeypatch):
    """Under DDP each process reads its own clock; the time stop is all-reduced so that a process whose
    clock has not reached train.max_minutes still stops with the one whose clock has (else it would wait
    forever in the next gradient all-reduce). Simulated: the all-reduce reports another process past it."""
    from aiayn.training import trainer as trainer_module

    trainer = prepare_run(small_config("train.max_minutes=60", "train.max_steps=50"), tmp_path)
    monkeypatch.setattr(trainer_module.D, "all_reduce_sum", lambda values, info: [1.0] * len(values))
    trainer.train()
    assert trainer.stop_reason == "reached train.max_minutes=60" and trainer.progress.step == 0


def _fake_clock(monkeypatch, *, start: float, seconds_per_step: float) -> dict:
    """The trainer's time.monotonic reads clock["now"], which every training step moves on."""
    from aiayn.training import trainer as trainer_module

    clock = {"now": start}
    monkeypatch.setattr(trainer_module.time, "monotonic", lambda: clock["now"])
    step = trainer_module.Trainer.train_step

    def timed_step(self, group):
        clock["now"] += seconds_per_step
        return step(self, group)

    monkeypatch.setattr(trainer_module.Trainer, "train_step", timed_step)
    return clock


def test_fit_steps_to_time_ends_the_linear_decay_within_the_time_budget(tmp_path, monkeypatch):
    """A 60-second budget at 6 seconds a step (a fake clock): at each validation the end of the decay moves
    to the last step that fits (99% of the time left), so the run stops at step 9 with its last update at
    lr 0, where the fixed max_steps=1000 would have been cut by the clock at lr ~1e-3."""
    clock = _fake_clock(monkeypatch, start=1000.0, seconds_per_step=6.0)
    cfg = small_config("train.schedule=linear", "train.lr=1e-3", "train.warmup_steps=2", "train.max_steps=1000",
                       "train.max_minutes=1", "train.fit_steps_to_time=true", "train.eval_every=2",
                       "train.save_every=100")
    trainer = prepare_run(cfg, tmp_path)
    trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["end_step"] for r in rows if "valid_loss" in r] == [9, 9, 9, 9]
    lrs = [r["lr"] for r in rows if "lr" in r]
    # the fit after update 2 already sets update 3's rate: the decay ends at step 9
    assert lrs[:4] == pytest.approx([5e-4, 1e-3, 1e-3 * 6 / 7, 1e-3 * 5 / 7])
    assert lrs[-1] == 0.0 and len(lrs) == 9
    assert trainer.stop_reason == ("reached step 9, the end of the linear decay that train.fit_steps_to_time "
                                   "chose to fit train.max_minutes=1 (last lr 0.00e+00)")
    assert clock["now"] - 1000.0 == 54.0  # inside the budget
    assert trainer.state_dict()["progress"]["end_step"] == 9  # kept in checkpoints: a resume goes on from it


def test_fit_steps_to_time_resumes_from_its_end_and_reads_older_checkpoints(tmp_path, monkeypatch, caplog):
    """10 s a step in a 60 s budget: the fits end the run at step 5. The same command again resumes from
    that checkpoint with its end and its lr (0); a checkpoint from before the option (no end_step in its
    progress) ends at train.max_steps; a clock that has not moved does not divide by zero; a budget that only
    the warmup fits says so."""
    from aiayn.training import trainer as trainer_module

    clock = _fake_clock(monkeypatch, start=0.0, seconds_per_step=10.0)
    extra = ("train.schedule=linear", "train.lr=1e-3", "train.warmup_steps=2", "train.max_steps=12",
             "train.max_minutes=1", "train.fit_steps_to_time=true", "train.eval_every=2", "train.save_every=2")
    first = prepare_run(small_config(*extra), tmp_path)
    first.train()
    assert first.progress.step == 5 and "chose to fit" in first.stop_reason
    first.run_lock.close()  # the first process ends
    again = prepare_run(small_config(*extra), tmp_path)
    assert again.progress.step == 5 and again.progress.end_step == 5
    assert again.optimizer.param_groups[0]["lr"] == 0.0
    progress = dict(again.state_dict()["progress"])
    del progress["end_step"]
    assert trainer_module.Progress(**progress).end_step == 0  # 0: the decay ends at train.max_steps
    frozen = prepare_run(small_config(*extra), tmp_path / "frozen")
    frozen.run_end.clock_start, frozen.run_end.deadline, frozen.progress.step = clock["now"], clock["now"] + 60, 2
    assert frozen.run_end.fit(frozen.progress) == 12  # 0 s a step so far: everything fits, up to max_steps
    late = prepare_run(small_config(*extra), tmp_path / "late")
    late.run_end.clock_start, late.run_end.deadline, late.progress.step = clock["now"] - 60, clock["now"] + 10, 2
    with caplog.at_level("WARNING", logger="aiayn.training.run_end"):
        assert late.run_end.fit(late.progress) == 2  # 30 s a step, 10 s left: nothing more fits, inside the warmup
    assert "ends within the lr warmup" in caplog.text


def test_fit_steps_to_time_needs_a_linear_schedule_and_a_time_budget():
    with pytest.raises(ConfigError, match="train.fit_steps_to_time .* needs train.max_minutes > 0"):
        small_config("train.schedule=linear", "train.lr=1e-3", "train.max_steps=100", "train.fit_steps_to_time=true")
    with pytest.raises(ConfigError, match="needs train.schedule=linear, not noam"):
        small_config("train.max_minutes=5", "train.fit_steps_to_time=true")


@pytest.mark.parametrize("fast", [True, False])
def test_bf16_falls_back_to_float32_where_it_would_be_emulated(tmp_path, monkeypatch, caplog, fast):
    """train.bf16 on a CPU without hardware bf16 (AVX2 only: torch's reference loop, a training step 60x
    slower, measured) trains in float32 and says so; where bf16 is fast it autocasts."""
    from aiayn.training import trainer as trainer_module

    monkeypatch.setattr(trainer_module, "bf16_is_fast", lambda device: fast)
    trainer = prepare_run(small_config("train.bf16=true", "train.max_steps=1"), tmp_path)
    with trainer._autocast():
        assert torch.is_autocast_enabled("cpu") is fast
    assert ("training in float32 instead" in caplog.text) is not fast
    trainer.train()
    assert trainer.progress.step == 1

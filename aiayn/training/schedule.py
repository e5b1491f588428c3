"""Learning-rate schedules: Noam (§5.3, the paper's), the two that fine-tuning a pretrained model needs
(inverse square root, as fairseq, and constant), and linear decay to zero at the last step (for a run with
a fixed budget of steps: the lr reaches 0 when the run ends instead of staying at peak * sqrt(warmup / n)),
each with a linear warmup.

Update n (n = 1, 2, ...) is made at rate(n), set as the optimizer's lr before it. Hand-written instead of
torch's LambdaLR, which takes only a torch.optim optimizer (aiayn's Adam is not one: aiayn/training/adam.py);
its state_dict keeps LambdaLR's keys, so checkpoints written with LambdaLR resume unchanged."""

import math
from collections.abc import Callable

from aiayn.config import SCHEDULES


def noam_rate(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)   (§5.3, eq. 3)"""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def inverse_sqrt_rate(step: int, peak_lr: float, warmup_steps: int) -> float:
    """fairseq's inverse_sqrt: linear warmup from 0 to peak_lr at warmup_steps, then peak_lr *
    sqrt(warmup_steps / step) (updates counted from 1, so the first update is not made at rate 0)."""
    step = max(step, 1)
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    return peak_lr * math.sqrt(warmup_steps / step)


def constant_rate(step: int, peak_lr: float, warmup_steps: int) -> float:
    """Linear warmup from 0 to peak_lr at warmup_steps, then peak_lr."""
    return peak_lr * min(max(step, 1) / warmup_steps, 1.0)


def linear_rate(step: int, peak_lr: float, warmup_steps: int, max_steps: int) -> float:
    """Linear warmup from 0 to peak_lr at warmup_steps, then linear decay to 0 at max_steps (as
    transformers' get_linear_schedule_with_warmup; fairseq's polynomial_decay with power 1)."""
    if step < warmup_steps:
        return constant_rate(step, peak_lr, warmup_steps)
    return peak_lr * max(max_steps - step, 0) / max(max_steps - warmup_steps, 1)


class Schedule:
    """Sets the lr of the optimizer's param groups to rate(n) before update n. last_epoch counts the updates
    made (LambdaLR's name for it)."""

    def __init__(self, *, optimizer, rate: Callable[[int], float]):
        self.optimizer, self.rate, self.last_epoch = optimizer, rate, 0
        self.refresh()

    def step(self) -> None:
        """After an update: the next one's lr."""
        self.last_epoch += 1
        self.refresh()

    def refresh(self) -> None:
        """Set the next update's lr again from the rate, after something it reads (the end of a linear decay)
        moved."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.rate(self.last_epoch + 1)

    def state_dict(self) -> dict:
        lr = self.optimizer.param_groups[0]["lr"]
        return {"last_epoch": self.last_epoch, "_step_count": self.last_epoch + 1, "base_lrs": [1.0],
                "_last_lr": [lr], "lr_lambdas": [None]}  # LambdaLR's keys

    def load_state_dict(self, saved: dict) -> None:
        """The count only: the lr of the next update is the one the optimizer's own state saved (as LambdaLR),
        since the rate may read things (the end of a fitted decay) that are restored after this."""
        self.last_epoch = int(saved["last_epoch"])


def lr_scheduler(optimizer, schedule: str, *, d_model: int, warmup_steps: int, factor: float = 1.0,
                 peak_lr: float = 0.0, end_step: Callable[[], int] | int = 0) -> Schedule:
    """noam uses d_model, warmup_steps and factor; inverse_sqrt and constant use peak_lr and warmup_steps;
    linear uses peak_lr, warmup_steps and end_step, the step where the lr reaches 0: a number
    (train.max_steps), or a function read at every update (a run that fits its end to a time budget moves
    it; see aiayn.training.run_end.RunEnd.fit)."""
    end = end_step if callable(end_step) else (lambda: end_step)
    if schedule == "noam":
        def rate(step):
            return noam_rate(step, d_model, warmup_steps, factor)
    elif schedule == "inverse_sqrt":
        def rate(step):
            return inverse_sqrt_rate(step, peak_lr, warmup_steps)
    elif schedule == "constant":
        def rate(step):
            return constant_rate(step, peak_lr, warmup_steps)
    elif schedule == "linear":
        def rate(step):
            return linear_rate(step, peak_lr, warmup_steps, end())
    else:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
    return Schedule(optimizer=optimizer, rate=rate)

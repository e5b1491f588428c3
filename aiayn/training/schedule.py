"""Learning-rate schedules: Noam (§5.3, the paper's), the two that fine-tuning a pretrained model needs
(inverse square root, as fairseq, and constant), and linear decay to zero at the last step (for a run with
a fixed budget of steps: the lr reaches 0 when the run ends instead of staying at peak * sqrt(warmup / n)),
each with a linear warmup.

The optimizer's base lr is 1.0 and LambdaLR multiplies it by the rate of the update being made: update n
(n = 1, 2, ...) gets rate(n). (Runs saved before the schedule choice existed resume unchanged: their
scheduler state is the same LambdaLR over the same Noam rate.)"""

import math
from collections.abc import Callable

from torch.optim.lr_scheduler import LambdaLR

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


def lr_scheduler(optimizer, schedule: str, *, d_model: int, warmup_steps: int, factor: float = 1.0,
                 peak_lr: float = 0.0, end_step: Callable[[], int] | int = 0) -> LambdaLR:
    """The optimizer's base lr must be 1.0. noam uses d_model, warmup_steps and factor; inverse_sqrt and
    constant use peak_lr and warmup_steps; linear uses peak_lr, warmup_steps and end_step, the step where
    the lr reaches 0: a number (train.max_steps), or a function read at every update (a run that fits its
    end to a time budget moves it; see Trainer._fit_end_step)."""
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
    return LambdaLR(optimizer, lambda step: rate(step + 1))  # LambdaLR counts from 0


def refresh_lr(scheduler: LambdaLR) -> None:
    """Set the next update's lr again from the schedule, after something it reads (the end of a linear
    decay) moved: LambdaLR computes it only in step(), right after the previous update."""
    for group, base, rate in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        group["lr"] = base * rate(scheduler.last_epoch)
    scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]  # what get_last_lr() reads

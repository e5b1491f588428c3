"""The learning-rate schedule of §5.3 (Noam)."""

from torch.optim.lr_scheduler import LambdaLR


def noam_rate(step: int, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)   (§5.3, eq. 3)"""
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def noam_scheduler(optimizer, d_model: int, warmup_steps: int, factor: float = 1.0) -> LambdaLR:
    """The optimizer's base lr must be 1.0; LambdaLR multiplies it by noam_rate(step + 1)."""
    return LambdaLR(optimizer, lambda step: noam_rate(step + 1, d_model, warmup_steps, factor))

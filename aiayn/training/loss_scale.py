"""Loss scaling for train.fp16: float16 autocast keeps 5 exponent bits, so the small gradients of a
Transformer's backward (1e-8 and below) would flush to zero; the loss is multiplied by a large factor before
backward, the gradients divided by it before clipping and the update, and an update whose gradients overflowed
(inf or NaN) is skipped while the factor halves (torch.amp.GradScaler's rule: it doubles after 2000 clean
updates). bfloat16 has float32's exponent range and needs none of this.

torch.amp.GradScaler drives aiayn's Adam (aiayn/training/adam.py) as it is: it unscales and checks the
gradients through `param_groups` and calls `step()` only when they are finite; it imports no torch._dynamo."""

import logging

import torch

from aiayn.errors import CheckpointError

log = logging.getLogger(__name__)

STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class LossScale:
    """A GradScaler when enabled (train.fp16), else a pass-through: scale() returns the loss as it is,
    step() just steps, and there is no state to save."""

    def __init__(self, *, enabled: bool, device: torch.device):
        self.enabled = enabled
        if enabled and device.type == "cpu":  # it runs there (the tests use it), but slowly
            log.warning("train.fp16 is for GPUs without bfloat16: on this CPU float16 autocast trains 5-6x "
                        "slower than float32 (measured on a tiny model, AVX-512); use train.bf16 instead")
        self.scaler = torch.amp.GradScaler(device.type, enabled=enabled)
        if enabled:  # the scale tensor now, not lazily at the first scale(): the worker threads share it
            self.scaler.scale(torch.zeros((), device=device))

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss times the current scale (safe from several threads at once: it only reads the scale)."""
        return self.scaler.scale(loss) if self.enabled else loss

    def unscale(self, optimizer) -> None:
        """Divide the gradients by the scale (before clipping: the norm is of the true gradients)."""
        if self.enabled:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer) -> None:
        """The optimizer's update unless the gradients overflowed, then the scale's update."""
        if not self.enabled:
            optimizer.step()
            return
        self.scaler.step(optimizer)
        self.scaler.update()

    def state_dict(self) -> dict:
        return self.scaler.state_dict() if self.enabled else {}

    def checked(self, saved) -> dict | None:
        """A saved state, checked before anything of the trainer changes; None: nothing to load (not fp16, or
        a checkpoint from a run without it, which then starts from the initial scale)."""
        if not self.enabled or saved is None:
            return None
        if not isinstance(saved, dict) or any(not isinstance(saved.get(k), (int, float)) for k in STATE_KEYS):
            raise CheckpointError(f"loss scale state: damaged (expected numbers for {', '.join(STATE_KEYS)})")
        return saved

    def load_state_dict(self, saved: dict | None) -> None:
        if saved is not None:
            self.scaler.load_state_dict(saved)

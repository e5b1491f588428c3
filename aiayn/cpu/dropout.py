"""Inverted dropout with a cheaper mask than torch's CPU kernel.

Each element is kept with probability 1 - p and scaled by 1 / (1 - p) (§5.4 residual dropout). On CPU the
cost is the random draw: torch.nn.functional.dropout's bernoulli_ takes about 3.5x a plain uniform draw,
and a uniform draw costs the same per element whatever its dtype (measured here, BENCHMARKS.md). So the
mask is cut from 64-bit draws, four 16-bit words each: a quarter of the draws. The kept probability is
1 - p rounded to 1/32768 (at worst), the scale stays 1 / (1 - p). The mask is a bool tensor, the one
thing autograd keeps for the backward (1 byte an element), and the output keeps the input's dtype.
FastDropout is the nn.Dropout that draws it: prepare_for_cpu puts it in the Transformer's residual dropout.
"""

import contextlib
import functools
import math
import sys
import threading

import torch
from torch import nn

# random_() fills an int64 with 63 random bits: of its four 16-bit words, the most significant has only 15
# (it is never negative). Its position in memory depends on the byte order.
_HIGH_WORD = 3 if sys.byteorder == "little" else 0
# The generator this thread's masks are drawn from (None: torch's default one). Training's micro-batch
# workers (aiayn/training/micro_batches.py) each draw from their own, so that threads running side by side
# draw the same masks whatever their timing.
_local = threading.local()


@contextlib.contextmanager
def mask_generator(generator: torch.Generator):
    """Draw this thread's dropout masks from `generator` inside the block."""
    previous = getattr(_local, "generator", None)
    _local.generator = generator
    try:
        yield
    finally:
        _local.generator = previous


@functools.lru_cache(maxsize=32)  # made once per (p, device), not at every call of a training step
def _thresholds(p: float, device: torch.device) -> torch.Tensor:
    """(4,) int16: a word is dropped when below its threshold, which has probability p (to 1/32768)."""
    full = -32768 + round(p * 65536)  # words uniform over [-32768, 32767]
    thresholds = [full] * 4
    thresholds[_HIGH_WORD] = round(p * 32768)  # the word uniform over [0, 32767]
    return torch.tensor(thresholds, dtype=torch.int16, device=device)


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """bool mask of `shape`, each element True (kept) with probability 1 - p, independently."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(
        generator=getattr(_local, "generator", None)).view(torch.int16)
    return (words.view(-1, 4) >= _thresholds(p, device)).view(-1)[:n].view(shape)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p > 0.999:  # near 1 the int16 thresholds would overflow
        return torch.nn.functional.dropout(x, p, True)
    return x * keep_mask(x.shape, p, x.device) * (1.0 / (1.0 - p))


class FastDropout(nn.Dropout):
    """nn.Dropout (the same p, no state) whose mask is `keep_mask`'s."""

    @classmethod
    def of(cls, plain: nn.Dropout) -> nn.Dropout:
        """`plain` itself when it is one already, else one of this class with plain's p and mode."""
        return plain if isinstance(plain, cls) else cls(plain.p).train(plain.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

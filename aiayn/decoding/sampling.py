"""Sampling: temperature, top-k and top-p (nucleus), over the model interface."""

from dataclasses import dataclass

import torch

from aiayn.decoding.greedy import step_decode
from aiayn.errors import AiaynError


@dataclass(frozen=True)
class SamplingOptions:
    """temperature > 0 divides the log-probs (below 1: sharper); top_k > 0 keeps the k likeliest tokens;
    top_p < 1 keeps the smallest set whose probability reaches top_p (nucleus); seed makes it repeatable."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def check(self) -> None:
        t, k, p = self.temperature, self.top_k, self.top_p
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 100:
            raise AiaynError(f"temperature must be a number in (0, 100], got {t!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise AiaynError(f"top_k must be an integer >= 0 (0 = off), got {k!r}")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise AiaynError(f"top_p must be a number in (0, 1] (1 = off), got {p!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not 0 <= self.seed < 2**63):
            raise AiaynError(f"seed must be an integer in [0, 2^63), got {self.seed!r}")


def filter_logits(log_probs: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """(B, V) -> the same with everything outside the top-k / nucleus set to -inf."""
    if top_k > 0:
        kth = log_probs.topk(min(top_k, log_probs.size(-1)), dim=-1).values[:, -1:]
        log_probs = log_probs.masked_fill(log_probs < kth, float("-inf"))
    if top_p < 1.0:
        sorted_lp, order = log_probs.sort(dim=-1, descending=True)
        probs = sorted_lp.softmax(-1)
        drop = probs.cumsum(-1) - probs >= top_p  # keep the smallest prefix whose mass reaches top_p
        log_probs = log_probs.scatter(-1, order, sorted_lp.masked_fill(drop, float("-inf")))
    return log_probs


def sample_decode(model, src, bos_id, eos_id, pad_id, temperature=1.0, top_k=0, top_p=1.0, max_len_a=1.0,
                  max_len_b=50, generator: torch.Generator | None = None, max_output_len: int | None = None,
                  deadline: float | None = None):
    """-> (hypotheses without bos/eos, summed log-probs under the model) for each sentence."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")

    def choose(log_probs):
        filtered = filter_logits(log_probs / temperature, top_k, top_p)
        return torch.multinomial(filtered.softmax(-1), 1, generator=generator).squeeze(1)

    return step_decode(model, src, bos_id, eos_id, pad_id, choose, max_len_a, max_len_b, max_output_len, deadline)

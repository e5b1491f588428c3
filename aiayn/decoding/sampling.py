"""Sampling: temperature, top-k and top-p (nucleus), over the model interface."""

import torch

from aiayn.decoding.greedy import step_decode


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
                  max_len_b=50, generator: torch.Generator | None = None):
    """-> (hypotheses without bos/eos, summed log-probs under the model) for each sentence."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")

    def choose(log_probs):
        filtered = filter_logits(log_probs / temperature, top_k, top_p)
        return torch.multinomial(filtered.softmax(-1), 1, generator=generator).squeeze(1)

    return step_decode(model, src, bos_id, eos_id, pad_id, choose, max_len_a, max_len_b)

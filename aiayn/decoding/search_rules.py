"""Rules every search applies (greedy, sampling, beam, and the CTranslate2 engine's length limits): what
may never be output, and how long an output may grow."""

import torch


def forbid_specials(log_probs: torch.Tensor, pad_id: int, bos_id: int) -> torch.Tensor:
    """Padding and <s> are never outputs: their log-probs become -inf (in place). (B, V)"""
    log_probs[:, [pad_id, bos_id]] = float("-inf")
    return log_probs


def max_lengths(src: torch.Tensor, pad_id: int, a: float, b: int, cap: int | None = None) -> torch.Tensor:
    """Per-sentence output length limit a * |source| + b (§6.1: source length + 50), at most `cap`
    (the model's positions: decoding step t reads position t). (B,)"""
    limits = ((src != pad_id).sum(1).float() * a + b).long().clamp_min(1)
    return limits if cap is None else limits.clamp_max(cap)

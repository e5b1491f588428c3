"""Label-smoothed cross-entropy (§5.4, eps_ls = 0.1), padding ignored."""

import torch
from torch import nn


def label_smoothed_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int, epsilon: float):
    """logits (B, T, V), tgt_out (B, T) -> (smoothed loss summed over real tokens, nll summed).
    The caller divides by the number of target tokens. Smoothing spreads epsilon uniformly over V."""
    flat_logits, flat_target = logits.flatten(0, 1).float(), tgt_out.flatten()
    loss = nn.functional.cross_entropy(flat_logits, flat_target, ignore_index=pad_id, reduction="sum",
                                       label_smoothing=epsilon)  # §5.4
    with torch.no_grad():
        nll = nn.functional.cross_entropy(flat_logits, flat_target, ignore_index=pad_id, reduction="sum")
    return loss, nll

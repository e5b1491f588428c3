"""Label-smoothed cross-entropy (§5.4, eps_ls = 0.1), padding ignored."""

import torch


def label_smoothed_loss(logits: torch.Tensor, tgt_out: torch.Tensor, pad_id: int, epsilon: float):
    """logits (..., V), tgt_out (...) -> (smoothed loss summed over real tokens, nll summed).

    The smoothed target puts 1 - eps on the reference and eps spread uniformly over all V tokens
    (Szegedy et al. 2016, as torch's cross_entropy(label_smoothing=eps)), so
    loss = (1 - eps) * nll + eps * mean_v(-log p_v). One log_softmax serves both terms (it is the
    largest single cost of a small model's step). The caller divides by the number of target tokens."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (..., V)
    real = tgt_out != pad_id  # (...)
    nll = -log_probs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # (...)
    smooth = -log_probs.sum(dim=-1) / log_probs.size(-1)  # (...) sum, not mean: mean's backward divides (N, V)
    loss = ((1.0 - epsilon) * nll + epsilon * smooth).masked_fill(~real, 0.0).sum()  # §5.4
    return loss, nll.detach().masked_fill(~real, 0.0).sum()

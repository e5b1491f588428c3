"""Greedy decoding over the model interface (encode, init_state, decode_step)."""

import torch


def max_lengths(src: torch.Tensor, pad_id: int, a: float, b: int) -> torch.Tensor:
    """Per-sentence output length limit a * |source| + b (§6.1: source length + 50). (B,)"""
    return ((src != pad_id).sum(1).float() * a + b).long().clamp_min(1)


@torch.no_grad()
def greedy_decode(model, src: torch.Tensor, bos_id: int, eos_id: int, pad_id: int,
                  max_len_a: float = 1.0, max_len_b: int = 50):
    """src (B, S) -> (hypotheses: list of token lists without bos/eos, scores: (B,) summed log-probs)."""
    limits = max_lengths(src, pad_id, max_len_a, max_len_b)
    state = model.init_state(model.encode(src), src)
    batch = src.size(0)
    tokens = torch.full((batch,), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    scores = torch.zeros(batch, device=src.device)
    outputs = []
    for t in range(int(limits.max())):
        log_probs, state = model.decode_step(tokens, state)
        best_score, tokens = log_probs.max(dim=-1)
        scores += torch.where(finished, 0.0, best_score)
        tokens = torch.where(finished, pad_id, tokens)
        outputs.append(tokens)
        finished |= (tokens == eos_id) | (t + 1 >= limits)
        if finished.all():
            break
    hyps = []
    for row in torch.stack(outputs, 1).tolist():
        hyp = []
        for tok in row:
            if tok in (eos_id, pad_id):
                break
            hyp.append(tok)
        hyps.append(hyp)
    return hyps, scores

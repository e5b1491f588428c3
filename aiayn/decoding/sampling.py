"""Sampling: temperature, top-k and top-p (nucleus), over the model interface."""

import torch

from aiayn.decoding.greedy import max_lengths


def filter_logits(log_probs: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """(B, V) -> the same with everything outside the top-k / nucleus set to -inf."""
    if top_k > 0:
        kth = log_probs.topk(min(top_k, log_probs.size(-1)), dim=-1).values[:, -1:]
        log_probs = log_probs.masked_fill(log_probs < kth, float("-inf"))
    if top_p < 1.0:
        sorted_lp, order = log_probs.sort(dim=-1, descending=True)
        cumulative = sorted_lp.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_lp.softmax(-1) >= top_p  # keep the smallest set reaching top_p
        log_probs = log_probs.scatter(-1, order, sorted_lp.masked_fill(drop, float("-inf")))
    return log_probs


@torch.no_grad()
def sample_decode(model, src, bos_id, eos_id, pad_id, temperature=1.0, top_k=0, top_p=1.0, max_len_a=1.0,
                  max_len_b=50, generator: torch.Generator | None = None):
    """-> (hypotheses without bos/eos, summed log-probs under the model) for each sentence."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    limits = max_lengths(src, pad_id, max_len_a, max_len_b)
    state = model.init_state(model.encode(src), src)
    tokens = torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros_like(tokens, dtype=torch.bool)
    scores, outputs = torch.zeros(src.size(0), device=src.device), []
    for t in range(int(limits.max())):
        log_probs, state = model.decode_step(tokens, state)
        filtered = filter_logits(log_probs / temperature, top_k, top_p)
        tokens = torch.multinomial(filtered.softmax(-1), 1, generator=generator).squeeze(1)
        scores += torch.where(finished, 0.0, log_probs.gather(1, tokens[:, None]).squeeze(1))
        tokens = torch.where(finished, pad_id, tokens)
        outputs.append(tokens)
        finished |= (tokens == eos_id) | (t + 1 >= limits)
        if finished.all():
            break
    hyps = []
    for row in torch.stack(outputs, 1).tolist():
        hyps.append(row[: next((i for i, x in enumerate(row) if x in (eos_id, pad_id)), len(row))])
    return hyps, scores

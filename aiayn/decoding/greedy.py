"""Token-by-token decoding over the model interface (encode, init_state, decode_step): greedy search, the
loop that sampling shares with it (a rule choosing each next token), and greedy translation of texts (the
dev-BLEU callback's decoder)."""

import time

import torch

from aiayn.decoding.batches import encode_sources, max_positions, pad_batch, search_in_batches
from aiayn.decoding.search_rules import forbid_specials, max_lengths
from aiayn.errors import BudgetExceeded


@torch.no_grad()
def step_decode(model, src, bos_id, eos_id, pad_id, choose, max_len_a=1.0, max_len_b=50, max_output_len=None,
                deadline=None):
    """One token per step for every sentence; choose(log_probs (B, V)) -> next tokens (B,).
    Returns (hypotheses: token lists without bos/eos, scores: (B,) summed log-probs of the chosen tokens).
    Past `deadline` (time.monotonic()) it stops with BudgetExceeded."""
    limits = max_lengths(src, pad_id, max_len_a, max_len_b, max_output_len)
    state = model.init_state(model.encode(src)[0], src)
    tokens = torch.full((src.size(0),), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros_like(tokens, dtype=torch.bool)
    scores, outputs = torch.zeros(src.size(0), device=src.device), []
    for t in range(int(limits.max())):
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceeded(f"decoding stopped after {t} steps: over its time budget")
        log_probs, state, _ = model.decode_step(tokens, state)
        log_probs = forbid_specials(log_probs, pad_id, bos_id)
        tokens = choose(log_probs)
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


def greedy_decode(model, src: torch.Tensor, bos_id: int, eos_id: int, pad_id: int,
                  max_len_a: float = 1.0, max_len_b: int = 50, max_output_len: int | None = None):
    """src (B, S) -> (hypotheses without bos/eos, summed log-probs (B,)), the argmax at every step."""
    return step_decode(model, src, bos_id, eos_id, pad_id, lambda lp: lp.argmax(dim=-1), max_len_a, max_len_b,
                       max_output_len)


@torch.no_grad()
def greedy_translate(model, tokenizer, sentences: list[str], decode_cfg, batch_size: int = 128) -> list[str]:
    """Texts -> greedy translations (dev BLEU during training: fast, no Translator). The model's training
    mode is restored afterwards."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    sources = encode_sources(tokenizer, sentences)
    cap = max_positions(model)

    def search_batch(indices: list[int]) -> list[str]:
        src = pad_batch([sources[i] for i in indices], tokenizer.pad_id, device)
        hyps, _ = greedy_decode(model, src, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id,
                                decode_cfg.max_len_a, decode_cfg.max_len_b, cap)
        return [tokenizer.decode(hyp) for hyp in hyps]

    outputs = search_in_batches(sources, search_batch, batch_size)
    model.train(was_training)
    return outputs

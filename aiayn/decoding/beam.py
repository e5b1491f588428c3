"""Batched beam search over the model interface, with the GNMT length penalty (§6.1: beam 4, alpha 0.6).

Per sentence, K live hypotheses advance one token per step through the KV cache. Of the 2K best
extensions, EOS-ended ones in the top K become finished hypotheses; the best K others stay live.
A sentence is done when it has K finished hypotheses and its best live one, scored as if it ended now
(raw / lp(current length)), no longer beats the K-th best finished one (the criterion of Hugging Face's
early_stopping=False), or at its length limit (a * |src| + b; live hypotheses then finish as they are).
Stopping at the first K finished hypotheses instead (as fairseq does) can drop a much better live one
(tests/test_decoding.py has such a case); a strict bound raw / lp(length limit) keeps hopeless beams
alive for dozens of steps (measured: ~10x slower on Multi30k). Done sentences leave the batch
(state.reorder), so a sentence never depends on its neighbours. Scores: sum of log-probs / lp(Y) with
lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting the EOS token. With lp_form="hf", lp(Y) = |Y|^alpha instead:
transformers' length_penalty (it divides by the generated length, EOS included, to the power alpha), with
which beam outputs equal transformers' generate(num_beams=K, early_stopping=False) for the same model
(tests/test_interop_marian.py).
"""

import time
from dataclasses import dataclass, field
from functools import partial

import torch

from aiayn.decoding.greedy import forbid_specials, max_lengths
from aiayn.errors import BudgetExceeded


@dataclass
class Hypothesis:
    tokens: list[int]  # without bos/eos
    score: float  # length-normalized
    log_prob: float  # raw sum of log-probs
    attention: dict | None = None  # {"cross": (L, H, T, S), "decoder_self": (L, H, T, T)}


LP_FORMS = ("gnmt", "hf")


def length_penalty(length: int | torch.Tensor, alpha: float, form: str = "gnmt"):
    """GNMT (Wu et al. 2016): lp(Y) = ((5 + |Y|) / 6) ** alpha; form "hf": |Y| ** alpha (transformers)."""
    if form == "hf":
        return length**alpha
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class _Search:
    """Book-keeping of the live part of the batch. B' active sentences, K beams each."""

    ids: torch.Tensor  # (B',) original sentence index of each active row
    limits: torch.Tensor  # (B',) max output length
    scores: torch.Tensor  # (B', K) sum of log-probs of live hypotheses
    history: torch.Tensor  # (B', K, t) tokens so far
    attn: list = field(default_factory=list)  # per step: dict of (B'*K, L, H, 1, *) maps


def _stack_attention(steps: list[dict], row: int, keys) -> dict:
    out = {}
    for key in keys:
        maps = [s[key][row] for s in steps]  # each (L, H, 1, n)
        width = maps[-1].size(-1)
        padded = [torch.nn.functional.pad(m, (0, width - m.size(-1))) for m in maps]
        out[key] = torch.cat(padded, dim=-2)  # (L, H, T, n)
    return out


@torch.no_grad()
def beam_search(model, src, bos_id, eos_id, pad_id, beam=4, alpha=0.6, max_len_a=1.0, max_len_b=50,
                n_best=1, return_attention=False, max_output_len=None, deadline=None, *,
                lp_form="gnmt") -> list[list[Hypothesis]]:
    """src (B, S) -> for each sentence its n_best hypotheses, best first. max_output_len caps the length
    limit a * |src| + b; past `deadline` (time.monotonic()) the search stops with BudgetExceeded.
    lp_form: "gnmt" or "hf", the length penalty's form (see length_penalty)."""
    lp = partial(length_penalty, alpha=alpha, form=lp_form)
    B, K, device = src.size(0), beam, src.device
    expand = torch.arange(B, device=device).repeat_interleave(K)
    state = model.init_state(model.encode(src), src).reorder(expand)
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0  # only one live hypothesis at the start
    limits = max_lengths(src, pad_id, max_len_a, max_len_b, max_output_len)
    search = _Search(torch.arange(B, device=device), limits, scores,
                     torch.empty(B, K, 0, dtype=torch.long, device=device))
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    tokens = torch.full((B * K,), bos_id, dtype=torch.long, device=device)
    for t in range(int(search.limits.max())):
        if deadline is not None and time.monotonic() > deadline:
            raise BudgetExceeded(f"decoding stopped after {t} steps: over its time budget")
        result = model.decode_step(tokens, state, return_attention) if return_attention else \
            model.decode_step(tokens, state)
        log_probs, state = forbid_specials(result[0], pad_id, bos_id), result[1]
        if return_attention:
            search.attn.append(result[2])
        tokens, keep = _advance(search, log_probs, t, K, eos_id, lp, finished, return_attention)
        if keep is None:
            break
        state = state.reorder(keep)
    return [sorted(h, key=lambda h: -h.score)[:n_best] for h in finished]


def _advance(search: _Search, log_probs, t, K, eos_id, lp, finished, return_attention):
    """One step of search on the active rows. Returns (next tokens (B''*K,), rows of the old state to
    keep (B''*K,)) or (None, None) when every sentence is done."""
    n_active, V = search.scores.size(0), log_probs.size(-1)
    candidates = (search.scores[:, :, None] + log_probs.view(n_active, K, V)).view(n_active, K * V)
    top_scores, top_index = candidates.topk(2 * K, dim=-1)  # (B', 2K)
    origin, token = top_index // V, top_index % V
    at_limit = (t + 1) >= search.limits  # (B',)
    row_origin = torch.arange(n_active, device=origin.device)[:, None] * K + origin  # rows of the old state
    is_eos = (token == eos_id) & torch.isfinite(top_scores)
    # live: the first K non-EOS candidates of each sentence
    live_rank = torch.cumsum(~is_eos, dim=1) - 1
    live_mask = ~is_eos & (live_rank < K)
    live_pos = torch.where(live_mask, live_rank, K).argsort(dim=1, stable=True)[:, :K]  # (B', K)
    _collect_finished(search, top_scores, token, row_origin, is_eos, at_limit, live_pos, K, lp,
                      finished, return_attention)
    done = _done(search, finished, top_scores, live_pos, K, lp) | at_limit
    if bool(done.all()):
        return None, None
    keep_sent = (~done).nonzero().squeeze(1)
    live_pos = live_pos[keep_sent]
    new_rows = row_origin[keep_sent].gather(1, live_pos)  # (B'', K)
    new_tokens = token[keep_sent].gather(1, live_pos)
    old_history = search.history.reshape(n_active * K, t).index_select(0, new_rows.flatten())
    search.history = torch.cat([old_history.view(len(keep_sent), K, t), new_tokens[:, :, None]], dim=2)
    search.scores = top_scores[keep_sent].gather(1, live_pos)
    search.ids, search.limits = search.ids[keep_sent], search.limits[keep_sent]
    if return_attention:
        flat = new_rows.flatten()
        search.attn = [{k: v.index_select(0, flat) for k, v in step.items()} for step in search.attn]
    return new_tokens.flatten(), new_rows.flatten()


def _done(search, finished, top_scores, live_pos, K, lp) -> torch.Tensor:
    """(B',) bool: the sentence has K finished hypotheses and its best live one, if it ended now, would not
    beat the K-th best of them."""
    best_live = top_scores.gather(1, live_pos).max(dim=1).values  # raw log-prob, (B',)
    bound = best_live / lp(search.history.size(2) + 1)
    done = []
    for b, sent in enumerate(search.ids.tolist()):
        scores = sorted((h.score for h in finished[sent]), reverse=True)
        done.append(len(scores) >= K and bool(bound[b] <= scores[K - 1]))
    return torch.tensor(done, dtype=torch.bool, device=top_scores.device)


def _collect_finished(search, top_scores, token, row_origin, is_eos, at_limit, live_pos, K, lp, finished,
                      return_attention):
    """EOS candidates within the top K finish; at the length limit the live ones finish too."""
    length = search.history.size(2) + 1
    history = search.history.reshape(search.history.size(0) * K, search.history.size(2))
    for b, sent in enumerate(search.ids.tolist()):
        picks = [(j, True) for j in range(K) if is_eos[b, j]]
        if at_limit[b]:
            picks += [(int(j), False) for j in live_pos[b] if torch.isfinite(top_scores[b, j])]
        for j, ended in picks:
            row = int(row_origin[b, j])
            tokens = history[row].tolist() + ([] if ended else [int(token[b, j])])
            raw = float(top_scores[b, j])
            attn = _stack_attention(search.attn, row, search.attn[0].keys()) if return_attention else None
            finished[sent].append(Hypothesis(tokens, raw / lp(length), raw, attn))

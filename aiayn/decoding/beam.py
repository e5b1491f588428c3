"""Batched beam search over the model interface, with the GNMT length penalty (§6.1: beam 4, alpha 0.6).

Per sentence, K live hypotheses advance one token per step through the KV cache. Of the 2K best
extensions, EOS-ended ones in the top K become finished hypotheses; the best K others stay live.
A sentence is done when it has K finished hypotheses and its best live one, scored as if it ended now
(raw / lp(current length)), no longer beats the K-th best finished one (the criterion of Hugging Face's
early_stopping=False), or at its length limit (a * |src| + b; live hypotheses then finish as they are).
Stopping at the first K finished hypotheses instead (as fairseq does) can drop a much better live one
(tests/test_decoding.py has such a case); a strict bound raw / lp(length limit) keeps hopeless beams
alive for dozens of steps (measured: ~10x slower on Multi30k). Done sentences leave the batch
(state.select), so a sentence never depends on its neighbours. Scores: sum of log-probs / lp(Y) with
lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting the EOS token. With lp_form="hf", lp(Y) = |Y|^alpha instead:
transformers' length_penalty (it divides by the generated length, EOS included, to the power alpha), with
which beam outputs equal transformers' generate(num_beams=K, early_stopping=False) for the same model
(tests/test_interop_marian.py).

Controls: min_length (</s> is forbidden before that many tokens), no_repeat_ngram_size (a token that
would repeat an n-gram of the hypothesis is forbidden, as in fairseq and transformers), and a target
prefix per sentence (its tokens are forced first, their log-probs count in the score; the search goes on
from there: the base of interactive post-editing).

Speed (BENCHMARKS.md, issue 10): the first step runs one row per sentence (the other K - 1 beams are
empty then); the 2K best of the K x V extensions are found from block maxima (torch's CPU topk is slow on
long rows); what a finished hypothesis needs is read with one .tolist() per tensor per step, not element by
element; the "done" test is one tensor comparison against the K-th best finished score.
"""

import time
from dataclasses import dataclass, field

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


@dataclass(frozen=True, kw_only=True)
class SearchParams:
    """What a beam search needs besides the model and the sources. Checked by the Translator (one place
    for API, CLI and server); max_output_len caps the length limit a * |src| + b; past `deadline`
    (time.monotonic()) the search stops with BudgetExceeded."""

    bos_id: int
    eos_id: int
    pad_id: int
    beam: int = 4
    alpha: float = 0.6
    lp_form: str = "gnmt"  # "gnmt" or "hf", see length_penalty
    max_len_a: float = 1.0
    max_len_b: int = 50
    max_output_len: int | None = None
    n_best: int = 1
    min_length: int = 0  # output tokens before </s> may end a hypothesis
    no_repeat_ngram_size: int = 0  # 0: off
    return_attention: bool = False
    deadline: float | None = None

    def lp(self, length):
        return length_penalty(length, self.alpha, self.lp_form)


@dataclass
class _Search:
    """Book-keeping of the live part of the batch: B' active sentences, G rows each (1 at the first step,
    then K)."""

    ids: list[int]  # original sentence index of each active sentence
    limits: torch.Tensor  # (B',) max output length
    scores: torch.Tensor  # (B', G) sum of log-probs of live hypotheses
    history: torch.Tensor  # (B' * G, t) tokens so far
    prefixes: torch.Tensor | None  # (B', P) forced first tokens, -1 past a sentence's prefix
    attn: list = field(default_factory=list)  # per step: dict of (B' * G, L, H, 1, *) maps


BLOCK = 128  # columns per block of the candidate search


def top_candidates(log_probs: torch.Tensor, scores: torch.Tensor, n: int):
    """The n best extensions of each sentence: log_probs (B', G, V) of its G rows, scores (B', G) of the
    rows' hypotheses -> (values (B', n) sorted high to low, origin row in 0..G-1 (B', n), token (B', n)).

    The n best of G x V sums lie in the n blocks of BLOCK columns with the highest maxima (another block's
    maximum is below n values already), so only those n x BLOCK sums are ranked: on a (256, 10000) step
    that is 0.3 ms where torch.topk over each sentence's G x V sums takes 5 ms on one core."""
    B, G, V = log_probs.shape
    if V < 8 * BLOCK:  # a small vocabulary: rank every sum
        values, index = (scores[:, :, None] + log_probs).view(B, G * V).topk(n, dim=1)
        return values, index // V, index % V
    rows = log_probs.view(B * G, V)
    n_full = V // BLOCK
    maxima = rows[:, : n_full * BLOCK].view(B * G, n_full, BLOCK).amax(dim=-1)  # (B' G, blocks)
    if V % BLOCK:
        maxima = torch.cat([maxima, rows[:, n_full * BLOCK:].amax(dim=-1, keepdim=True)], dim=1)
    n_blocks = maxima.size(1)
    block_best = (maxima.view(B, G, n_blocks) + scores[:, :, None]).view(B, G * n_blocks)
    blocks = block_best.topk(n, dim=1).indices  # (B', n): origin * n_blocks + block
    origin = blocks // n_blocks
    columns = (blocks % n_blocks)[:, :, None] * BLOCK + torch.arange(BLOCK, device=rows.device)  # (B', n, BLOCK)
    row_index = (torch.arange(B, device=rows.device)[:, None] * G + origin)[:, :, None]
    sums = rows[row_index, columns.clamp_max(V - 1)] + scores.gather(1, origin)[:, :, None]
    sums = sums.masked_fill(columns >= V, float("-inf")).view(B, n * BLOCK)  # the last block's overhang
    values, pick = sums.topk(n, dim=1)
    return values, origin.gather(1, pick // BLOCK), columns.view(B, n * BLOCK).gather(1, pick)


@torch.no_grad()
def beam_search(model, src: torch.Tensor, params: SearchParams,
                prefixes: list[list[int]] | None = None) -> list[list[Hypothesis]]:
    """src (B, S) -> for each sentence its params.n_best hypotheses, best first. prefixes: per sentence the
    target tokens to force first (an empty list: none)."""
    B, device = src.size(0), src.device
    memory, _ = model.encode(src)
    state = model.init_state(memory, src)  # one row per sentence until the first step is taken
    limits = max_lengths(src, params.pad_id, params.max_len_a, params.max_len_b, params.max_output_len)
    table = _prefix_table(prefixes, device)
    if table is not None:  # room for the forced tokens and one more
        limits = torch.maximum(limits, (table >= 0).sum(1) + 1)
    search = _Search(list(range(B)), limits, torch.zeros(B, 1, device=device),
                     torch.empty(B, 0, dtype=torch.long, device=device), table)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    tokens = torch.full((B,), params.bos_id, dtype=torch.long, device=device)
    for t in range(int(limits.max())):
        if params.deadline is not None and time.monotonic() > params.deadline:
            raise BudgetExceeded(f"decoding stopped after {t} steps: over its time budget")
        log_probs, state, maps = model.decode_step(tokens, state, params.return_attention)
        log_probs = _restrict(forbid_specials(log_probs, params.pad_id, params.bos_id), search, t, params)
        if maps is not None:
            search.attn.append(maps)
        tokens, rows, sentences = _advance(search, log_probs, t, params, finished)
        if tokens is None:
            break
        state = state.select(rows, sentences)
    return [sorted(h, key=lambda h: -h.score)[: params.n_best] for h in finished]


def _prefix_table(prefixes, device) -> torch.Tensor | None:
    """Per-sentence forced tokens as one (B, P) table, -1 past each prefix; None when no sentence has one."""
    if not prefixes or not any(prefixes):
        return None
    width = max(len(p) for p in prefixes)
    return torch.tensor([p + [-1] * (width - len(p)) for p in prefixes], dtype=torch.long, device=device)


def _restrict(log_probs, search: _Search, t: int, params: SearchParams) -> torch.Tensor:
    """The controls, on log_probs (R, V) in place: no </s> before min_length, no repeated n-gram, and
    rows within their sentence's prefix keep only the forced token, at the model's log-prob for it."""
    forced = None
    if search.prefixes is not None and t < search.prefixes.size(1):
        forced = search.prefixes[:, t].repeat_interleave(log_probs.size(0) // len(search.ids))  # (R,)
        rows = (forced >= 0).nonzero().squeeze(1)
        forced, kept = (rows, forced[rows]), log_probs[rows, forced[rows]]
    if t < params.min_length:
        log_probs[:, params.eos_id] = float("-inf")
    n = params.no_repeat_ngram_size
    if n and t + 1 >= n:
        _forbid_repeats(log_probs, search.history.tolist(), n)
    if forced is not None:
        log_probs[forced[0]] = float("-inf")
        log_probs[forced] = kept
    return log_probs


def _forbid_repeats(log_probs, histories: list[list[int]], n: int) -> None:
    """A row may not output a token that completes an n-gram it already holds (fairseq's and
    transformers' no_repeat_ngram_size)."""
    rows, banned = [], []
    for row, h in enumerate(histories):
        tail = h[len(h) - n + 1:] if n > 1 else []
        for i in range(len(h) - n + 1):
            if h[i: i + n - 1] == tail:
                rows.append(row)
                banned.append(h[i + n - 1])
    if rows:
        log_probs[rows, banned] = float("-inf")


def _advance(search: _Search, log_probs, t: int, params: SearchParams, finished):
    """One step of search on the active rows. Returns (next tokens (B''K,), rows of the old state to keep
    (B''K,), sentences of the old state kept (B'',) or None if all are) or (None, None, None) when every
    sentence is done."""
    K, n_active = params.beam, len(search.ids)
    G = log_probs.size(0) // n_active
    top_scores, origin, token = top_candidates(log_probs.view(n_active, G, -1), search.scores, 2 * K)
    row_origin = torch.arange(n_active, device=origin.device)[:, None] * G + origin  # rows of the old state
    is_eos = (token == params.eos_id) & torch.isfinite(top_scores)
    # live: the first K non-EOS candidates of each sentence (at most G <= K of the 2K end with EOS)
    live_rank = torch.cumsum(~is_eos, dim=1) - 1
    live_pos = torch.where(~is_eos & (live_rank < K), live_rank, K).argsort(dim=1, stable=True)[:, :K]  # (B', K)
    at_limit = (t + 1) >= search.limits  # (B',)
    _collect_finished(search, top_scores, token, row_origin, is_eos[:, :K], at_limit, live_pos, params, finished)
    done = _done(search, top_scores, live_pos, t, params, finished) | at_limit
    if bool(done.all()):
        return None, None, None
    keep_sent = (~done).nonzero().squeeze(1)
    all_kept = len(keep_sent) == n_active
    if not all_kept:
        live_pos, row_origin, token, top_scores = (x[keep_sent] for x in (live_pos, row_origin, token, top_scores))
        search.ids = [search.ids[i] for i in keep_sent.tolist()]
        search.limits = search.limits[keep_sent]
        if search.prefixes is not None:
            search.prefixes = search.prefixes[keep_sent]
    new_rows = row_origin.gather(1, live_pos).flatten()  # (B''K,)
    new_tokens = token.gather(1, live_pos).flatten()
    search.history = torch.cat([search.history.index_select(0, new_rows), new_tokens[:, None]], dim=1)
    search.scores = top_scores.gather(1, live_pos)
    if search.attn:
        search.attn = [{k: v.index_select(0, new_rows) for k, v in step.items()} for step in search.attn]
    return new_tokens, new_rows, None if all_kept else keep_sent


def _done(search: _Search, top_scores, live_pos, t, params: SearchParams, finished) -> torch.Tensor:
    """(B',) bool: the sentence has K finished hypotheses and its best live one, if it ended now, would not
    beat the K-th best of them."""
    K = params.beam
    kth = [finished[s][K - 1].score if len(finished[s]) >= K else float("-inf") for s in search.ids]
    kth = torch.tensor(kth, device=top_scores.device)
    best_live = top_scores.gather(1, live_pos[:, :1]).squeeze(1)  # candidates are sorted: the first live one
    return torch.isfinite(kth) & (best_live / params.lp(t + 1) <= kth)


def _collect_finished(search: _Search, top_scores, token, row_origin, eos_top_k, at_limit, live_pos,
                      params: SearchParams, finished) -> None:
    """EOS candidates within the top K finish; at the length limit the live ones finish too. Each
    sentence's list stays sorted best first (_done reads its K-th)."""
    events = (eos_top_k.any(dim=1) | at_limit).nonzero().squeeze(1)  # sentences with something finishing
    if len(events) == 0:
        return
    scores, tokens, origins, eos, limit, live = (x[events].tolist() for x in (
        top_scores, token, row_origin, eos_top_k, at_limit, live_pos))
    lp = params.lp(search.history.size(1) + 1)  # |Y| with the token of this step
    for i, b in enumerate(events.tolist()):
        picks = [(j, True) for j in range(params.beam) if eos[i][j]]
        if limit[i]:
            picks += [(j, False) for j in live[i] if scores[i][j] != float("-inf")]
        sent = finished[search.ids[b]]
        for j, ended in picks:
            row = origins[i][j]
            hyp_tokens = search.history[row].tolist() + ([] if ended else [tokens[i][j]])
            attn = _stack_attention(search.attn, row) if search.attn else None
            sent.append(Hypothesis(hyp_tokens, scores[i][j] / lp, scores[i][j], attn))
        sent.sort(key=lambda h: -h.score)


def _stack_attention(steps: list[dict], row: int) -> dict:
    out = {}
    for key in steps[0]:
        maps = [s[key][row] for s in steps]  # each (L, H, 1, n)
        width = maps[-1].size(-1)
        padded = [torch.nn.functional.pad(m, (0, width - m.size(-1))) for m in maps]
        out[key] = torch.cat(padded, dim=-2)  # (L, H, T, n)
    return out


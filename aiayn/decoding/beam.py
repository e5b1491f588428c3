"""Batched beam search over the model interface, with the GNMT length penalty (§6.1: beam 4, alpha 0.6).

Per sentence, K live hypotheses advance one token per step through the KV cache. Of the 2K best
extensions, EOS-ended ones in the top K become finished hypotheses; the best K others stay live.
A sentence is done when it has K finished hypotheses and its best live one, scored as if it ended now
(raw / lp(current length)), no longer beats the K-th best finished one (the criterion of Hugging Face's
early_stopping=False), or at its length limit (a * |src| + b; live hypotheses then finish as they are).
Stopping at the first K finished hypotheses instead (as fairseq does) can drop a much better live one
(tests/decoding/test_decoding.py has such a case); a strict bound raw / lp(length limit) keeps hopeless beams
alive for dozens of steps (measured: ~10x slower on Multi30k). With early_stopping (transformers'
early_stopping=True, fairseq's and CTranslate2's rule with patience 1) a sentence is done as soon as K
hypotheses have finished: fewer steps, the same search as CTranslate2's, at the risk above. Done
sentences leave the batch (state.select), so a sentence never depends on its neighbours. Scores: sum of
log-probs / lp(Y) with lp(Y) = ((5 + |Y|) / 6)^alpha, |Y| counting the EOS token. With lp_form="hf",
lp(Y) = |Y|^alpha instead: transformers' length_penalty (it divides by the generated length, EOS included,
to the power alpha), with which beam outputs equal transformers' generate(num_beams=K, early_stopping=False)
for the same model (tests/interop/test_interop_marian.py).

Controls: min_length (</s> is forbidden before that many tokens), no_repeat_ngram_size (a token that
would repeat an n-gram of the hypothesis is forbidden, as in fairseq and transformers), and a target
prefix per sentence (its tokens are forced first, their log-probs count in the score; the search goes on
from there: the base of interactive post-editing).
Lexical constraints per sentence (aiayn.decoding.constraints): phrases each output must contain, by dynamic
beam allocation; a sentence without them is searched exactly as before, batch-mates with them or not.
The finished hypotheses are ranked by `rank`: fewest unmet constraint tokens (0 but at the length limit),
then the highest score, ties in the order they finished. A trace recorder (aiayn.decoding.beam_trace) may
watch a search: each step's candidates, their scores and what became of them; None costs one test a
sentence a step.

Speed (BENCHMARKS.md, decoding speed): the first step runs one row per sentence (the other K - 1 beams are
empty then); the 2K best of the K x V extensions are found from block maxima (torch's CPU topk is slow on
long rows); those candidates are read once per step (.tolist()), and the rest of the step's book-keeping
(finished hypotheses, the "done" test, histories) is plain Python over B' x 2K numbers, cheaper than the
~40 small tensor operations it replaced (a batch-1 step is dominated by per-operation costs). A caller
may hand beam_search a step_candidates(tokens, state, scores, n, (pad, bos)) -> ((values, origin, token),
state) that finds the candidates itself (aiayn.decoding.compiled, inside its compiled step): it is used
on the steps whose log-probs no control changes.
"""

import time
from dataclasses import dataclass, field

import torch

from aiayn.decoding.constraints import allocate, constraint_tokens, gather_extras, start_states, unmet_rows
from aiayn.decoding.search_rules import forbid_specials, max_lengths
from aiayn.errors import BudgetExceeded


@dataclass
class Hypothesis:
    tokens: list[int]  # without bos/eos
    score: float  # length-normalized
    log_prob: float | None  # raw sum of log-probs (None: an engine that reports only scores, CTranslate2)
    attention: dict | None = None  # {"cross": (L, H, T, S), "decoder_self": (L, H, T, T)}
    unmet: int = 0  # constraint tokens it misses (it reached the length limit before writing them)


def rank(h: Hypothesis) -> tuple:
    """How finished hypotheses are ranked (a stable sort: ties keep the order they finished in)."""
    return h.unmet, -h.score


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
    early_stopping: bool = False  # done at K finished hypotheses (CTranslate2's rule), not when none can win
    return_attention: bool = False
    deadline: float | None = None

    def lp(self, length):
        return length_penalty(length, self.alpha, self.lp_form)


@dataclass
class _Search:
    """Book-keeping of the live part of the batch: B' active sentences, G rows each (1 at the first step,
    then K). Plain Python lists where a step reads them element by element (a step at batch 1 is a few
    dozen small operations, so each tensor operation saved counts); tensors where the model needs them."""

    ids: list[int]  # original sentence index of each active sentence
    limits: list[int]  # (B',) max output length
    scores: torch.Tensor  # (B', G) sum of log-probs of live hypotheses
    history: list[list[int]]  # (B' * G) rows: tokens so far
    prefixes: torch.Tensor | None  # (B', P) forced first tokens, -1 past a sentence's prefix
    attn: list = field(default_factory=list)  # per step: dict of (B' * G, L, H, 1, *) maps
    constraints: list | None = None  # (B',) per sentence None or its rows' G ConstraintStates; None: none
    trace: object | None = None  # a recorder (aiayn.decoding.beam_trace.TraceRecorder) or None


NEG_INF = float("-inf")
BLOCK = 128  # columns per block of the candidate search
MIN_BLOCKS = 8  # blocks of a row below which every sum is ranked (a vocabulary under 8 x BLOCK)


def eager_candidates(log_probs: torch.Tensor, scores: torch.Tensor, n: int):
    """top_candidates, or where its block search has fewer blocks than candidates to pick (n > G x blocks:
    a wide beam at a step of few rows, e.g. beam 40 on a 10,000-piece vocabulary at the first step) every
    sum ranked. Outside traced code: the branch is on sizes the compiled step takes as dynamic."""
    B, G, V = log_probs.shape
    if V >= MIN_BLOCKS * BLOCK and n > G * -(-V // BLOCK):
        values, index = (scores[:, :, None] + log_probs).view(B, G * V).topk(n, dim=1)
        return values, index // V, index % V
    return top_candidates(log_probs, scores, n)


def top_candidates(log_probs: torch.Tensor, scores: torch.Tensor, n: int):
    """The n best extensions of each sentence: log_probs (B', G, V) of its G rows, scores (B', G) of the
    rows' hypotheses -> (values (B', n) sorted high to low, origin row in 0..G-1 (B', n), token (B', n)).

    The n best of G x V sums lie in the n blocks of BLOCK columns with the highest maxima (another block's
    maximum is below n values already), so only those n x BLOCK sums are ranked: on a (256, 10000) step
    that is 0.3 ms where torch.topk over each sentence's G x V sums takes 5 ms on one core. The blocks are
    read as slices of a strided view (Tensor.unfold), not element by element: at (64, 4, 10000), 0.9
    against 1.2 ms a call (whole searches at batch 64 were within the noise). No branch
    depends on the values: aiayn.decoding.compiled traces it into its compiled step."""
    B, G, V = log_probs.shape
    if V < MIN_BLOCKS * BLOCK:  # a small vocabulary: rank every sum
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
    # each chosen block as BLOCK columns from its start: a partial last block is read as the last BLOCK
    # columns, and its first ones, which belong to the block before, are masked below
    starts = ((blocks % n_blocks) * BLOCK).clamp_max_(V - BLOCK)  # (B', n)
    row_index = torch.arange(B, device=rows.device)[:, None] * G + origin  # (B', n)
    windows = rows.unfold(1, BLOCK, 1)  # (B' G, V - BLOCK + 1, BLOCK), a view: BLOCK columns from each start
    sums = windows[row_index, starts] + scores.gather(1, origin)[:, :, None]  # (B', n, BLOCK): slices copied
    if V % BLOCK:  # where the partial last block was chosen (rare), its columns of the block before are masked
        seen = torch.arange(BLOCK, device=rows.device) < n_full * BLOCK - (V - BLOCK)
        sums = sums.masked_fill((starts == V - BLOCK)[:, :, None] & seen, float("-inf"))
    values, pick = sums.view(B, n * BLOCK).topk(n, dim=1)
    return values, origin.gather(1, pick // BLOCK), starts.gather(1, pick // BLOCK) + pick % BLOCK


@torch.no_grad()
def beam_search(model, src: torch.Tensor, params: SearchParams, prefixes: list[list[int]] | None = None, *,
                step_candidates=None, constraints: list[list[list[int]]] | None = None,
                trace=None) -> list[list[Hypothesis]]:
    """src (B, S) -> for each sentence its params.n_best hypotheses, best first (by `rank`). prefixes: per
    sentence the target tokens to force first (an empty list: none). step_candidates: the model's own decode
    step with candidate search (aiayn.decoding.compiled.CompiledDecoder.step_candidates), for the steps no
    control changes (None: decode_step, then top_candidates). constraints: per sentence its phrases as
    target token ids ([] for none). trace: a recorder of every step (aiayn.decoding.beam_trace)."""
    B, device = src.size(0), src.device
    memory, _ = model.encode(src)
    state = model.init_state(memory, src)  # one row per sentence until the first step is taken
    limits = max_lengths(src, params.pad_id, params.max_len_a, params.max_len_b, params.max_output_len)
    table = _prefix_table(prefixes, device)
    if table is not None:  # room for the forced tokens and one more
        limits = torch.maximum(limits, (table >= 0).sum(1) + 1)
    limits = limits.clamp_min(params.min_length + 1)  # room for min_length tokens and </s>, within the cap
    states = start_states(constraints)
    if states is not None:  # room for the prefix, every constraint token and </s>
        forced = (table >= 0).sum(1).tolist() if table is not None else [0] * B
        need = [f + c + 1 for f, c in zip(forced, constraint_tokens(constraints, B))]
        limits = torch.maximum(limits, torch.tensor(need, device=limits.device))
    search = _Search(list(range(B)), limits.tolist(), torch.zeros(B, 1, device=device), [[] for _ in range(B)], table,
                     constraints=None if states is None else [None if s is None else [s] for s in states], trace=trace)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    tokens = torch.full((B,), params.bos_id, dtype=torch.long, device=device)
    for t in range(max(search.limits)):
        if params.deadline is not None and time.monotonic() > params.deadline:
            raise BudgetExceeded(f"decoding stopped after {t} steps: over its time budget")
        n = 2 * params.beam
        if step_candidates is not None and not params.return_attention and not _controls_at(t, search, params) \
                and n <= MIN_BLOCKS * search.scores.size(1):  # else too few blocks for top_candidates: see there
            # the model finds the candidates itself (aiayn.decoding.compiled: inside its compiled step)
            candidates, state = step_candidates(tokens, state, search.scores, n, (params.pad_id, params.bos_id))
        else:
            log_probs, state, maps = model.decode_step(tokens, state, params.return_attention)
            log_probs = _restrict(forbid_specials(log_probs, params.pad_id, params.bos_id), search, t, params)
            if maps is not None:
                search.attn.append(maps)
            candidates = eager_candidates(log_probs.view(*search.scores.shape, -1), search.scores, n)
            if search.constraints is not None:
                candidates = (*candidates, gather_extras(search.constraints, log_probs, search.scores))
        tokens, rows, sentences = _advance(search, candidates, t, params, finished)
        if tokens is None:
            break
        state = state.select(rows, sentences)
    return [sorted(h, key=rank)[: params.n_best] for h in finished]


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
    if search.constraints is not None:  # no </s> before every constraint is met
        unmet = unmet_rows(search.constraints, search.scores.size(1))
        if unmet:
            log_probs[unmet, params.eos_id] = float("-inf")
    n = params.no_repeat_ngram_size
    if n and t + 1 >= n:
        _forbid_repeats(log_probs, search.history, n)
    if forced is not None:
        log_probs[forced[0]] = float("-inf")
        log_probs[forced] = kept
    return log_probs


def _controls_at(t: int, search: _Search, params: SearchParams) -> bool:
    """Whether _restrict changes the log-probs of step t."""
    prefix = search.prefixes is not None and t < search.prefixes.size(1)
    return prefix or t < params.min_length or params.no_repeat_ngram_size > 0 or search.constraints is not None


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


def _advance(search: _Search, candidates, t: int, params: SearchParams, finished):
    """One step of search on the active rows, from candidates = top_candidates(...) (values, origin row,
    token), each (B', 2K), and with constraints the extra candidates of gather_extras. Of each sentence's
    2K best extensions, EOS-ended ones in the top K finish; the first K others stay live (at most G <= K of
    the 2K end with EOS, so there are K; a sentence with constraints deals them over its banks instead).
    Returns (next tokens (B''K,), rows of the old state to keep (B''K,), sentences of the old state kept
    (B'',) or None if all are) or (None, None, None) when every sentence is done."""
    K, (n_active, G) = params.beam, search.scores.shape
    top, origin, token = (c.tolist() for c in candidates[:3])  # one read each: (B', 2K)
    extras = candidates[3] if len(candidates) > 3 else None
    lp_now = params.lp(t + 1)  # |Y| with the token of this step
    new_rows, new_tokens, new_scores, keep_sent, new_states = [], [], [], [], []
    for b in range(n_active):
        rows = [b * G + o for o in origin[b]]
        values, toks, states = top[b], token[b], None
        if extras is None or extras[b] is None:
            is_eos = [toks[j] == params.eos_id and values[j] != NEG_INF for j in range(2 * K)]
            ended = [j for j in range(K) if is_eos[j]]  # EOS candidates beyond the top K are dropped
            live = [j for j in range(2 * K) if not is_eos[j]][:K]
        else:
            pool = allocate(top=values, rows=rows, tokens=toks, extra=extras[b], states=search.constraints[b],
                            row_base=b * G, K=K, eos=params.eos_id)
            values, rows, toks, ended, live, states = pool.values, pool.rows, pool.tokens, pool.ended, pool.live, \
                pool.states
        at_limit = t + 1 >= search.limits[b]
        picks = [(j, True) for j in ended] + ([(j, False) for j in live if values[j] != NEG_INF] if at_limit else [])
        sent = finished[search.ids[b]]
        for j, eos in picks:
            tokens = search.history[rows[j]] + ([] if eos else [toks[j]])
            attn = _stack_attention(search.attn, rows[j]) if search.attn else None
            unmet = 0 if eos or states is None else states[j].unmet
            sent.append(Hypothesis(tokens, values[j] / lp_now, values[j], attn, unmet))
        if picks:
            sent.sort(key=rank)
        # done: K finished and (unless early_stopping) the best live one, if it ended now, would not beat
        # the K-th of them
        can_win = not params.early_stopping and len(sent) >= K and values[live[0]] / lp_now > sent[K - 1].score
        done = at_limit or (len(sent) >= K and not can_win)
        if search.trace is not None:
            search.trace.record(sentence=search.ids[b], step=t, lp=lp_now, values=values, rows=rows, tokens=toks,
                                history=search.history, ended=ended, live=live, at_limit=at_limit, done=done,
                                states=states)
        if done:
            continue
        keep_sent.append(b)
        new_rows += [rows[j] for j in live]
        new_tokens += [toks[j] for j in live]
        new_scores.append([values[j] for j in live])
        if search.constraints is not None:
            new_states.append(None if states is None else [states[j] for j in live])
    if not keep_sent:
        return None, None, None
    return _keep(search, keep_sent, n_active, new_rows, new_tokens, new_scores, new_states)


def _keep(search: _Search, keep_sent, n_active, new_rows, new_tokens, new_scores, new_states):
    """The book-keeping of the rows that stay: (next tokens, rows of the old state, sentences kept or None)."""
    device = search.scores.device
    all_kept = len(keep_sent) == n_active
    kept = None if all_kept else torch.tensor(keep_sent, device=device)
    if not all_kept:
        search.ids = [search.ids[b] for b in keep_sent]
        search.limits = [search.limits[b] for b in keep_sent]
        if search.prefixes is not None:
            search.prefixes = search.prefixes[kept]
    if search.constraints is not None:
        search.constraints = new_states
    search.history = [search.history[r] + [tok] for r, tok in zip(new_rows, new_tokens)]
    search.scores = torch.tensor(new_scores, device=device)
    rows = torch.tensor(new_rows, device=device)
    if search.attn:
        search.attn = [{k: v.index_select(0, rows) for k, v in step.items()} for step in search.attn]
    return torch.tensor(new_tokens, device=device), rows, kept


def _stack_attention(steps: list[dict], row: int) -> dict:
    out = {}
    for key in steps[0]:
        maps = [s[key][row] for s in steps]  # each (L, H, 1, n)
        width = maps[-1].size(-1)
        padded = [torch.nn.functional.pad(m, (0, width - m.size(-1))) for m in maps]
        out[key] = torch.cat(padded, dim=-2)  # (L, H, T, n)
    return out


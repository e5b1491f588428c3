"""Lexical constraints for beam search: phrases every translation of a sentence must contain, found by
dynamic beam allocation (Post & Vilar 2018, "Fast Lexically Constrained Decoding with Dynamic Beam
Allocation"; the round-robin over banks of Hu et al. 2019, as in fairseq's LexicallyConstrainedBeamSearch).

Each hypothesis carries a ConstraintState: which phrases it has written, and the phrases it is in the
middle of (a partial match is lost when the next token does not continue it). A step of a sentence with
constraints gathers candidates from three places: the 2K best extensions (as without constraints), for
each live hypothesis the tokens that would advance one of its constraints, and its own best token. The
live candidates are grouped into banks by the number of constraint tokens met, and the K places of the
beam are dealt round-robin over the banks, fullest bank first (the best of bank C, of C - 1, ..., of 0,
then the second best of each, ...), so hypotheses that met more constraints keep a place even when their
scores are lower. </s> is forbidden to a hypothesis that has not met all its constraints; at the length
limit live hypotheses finish as they are, and one that misses some says so (Hypothesis.unmet).
"""

from dataclasses import dataclass

from aiayn.data.spm_training import reserved_piece, reserved_reason
from aiayn.errors import AiaynError

NEG_INF = float("-inf")


class ConstraintState:
    """Where one hypothesis stands: `done` (bit i: phrase i written) and `partial` ((phrase, tokens
    matched) of the matches in progress). Immutable; hypotheses share states."""

    __slots__ = ("phrases", "done", "partial", "met", "total")

    def __init__(self, *, phrases: tuple[tuple[int, ...], ...], done: int = 0,
                 partial: tuple[tuple[int, int], ...] = ()):
        self.phrases, self.done, self.partial = phrases, done, partial
        self.total = sum(len(p) for p in phrases)
        written = sum(len(p) for i, p in enumerate(phrases) if done >> i & 1)
        self.met = written + max((j for _, j in partial), default=0)  # the bank

    @property
    def all_met(self) -> bool:
        return self.done == (1 << len(self.phrases)) - 1

    @property
    def unmet(self) -> int:
        """Constraint tokens not yet written (a partial match counts as written so far)."""
        return self.total - self.met

    def wanted(self) -> set[int]:
        """The tokens that would continue a partial match or start an unmet phrase."""
        out = {self.phrases[i][j] for i, j in self.partial}
        out.update(p[0] for i, p in enumerate(self.phrases) if not self.done >> i & 1)
        return out

    def advance(self, token: int) -> "ConstraintState":
        """The state after writing `token`. One token completes at most one phrase (a phrase given twice
        must be written twice); matches it does not continue are lost."""
        if token not in self.wanted():
            return self if not self.partial else ConstraintState(phrases=self.phrases, done=self.done)
        done, partial = self.done, []
        starts = tuple((i, 0) for i in range(len(self.phrases)) if not self.done >> i & 1)
        for i, j in self.partial + starts:
            phrase = self.phrases[i]
            if done >> i & 1 or phrase[j] != token:
                continue
            if j + 1 == len(phrase) and done == self.done:
                done |= 1 << i
            else:
                partial.append((i, j + 1))
        partial = tuple(dict.fromkeys(m for m in partial if not done >> m[0] & 1 and m[1] < len(self.phrases[m[0]])))
        return ConstraintState(phrases=self.phrases, done=done, partial=partial)


def start_states(constraints: list[list[list[int]]] | None) -> list[ConstraintState | None] | None:
    """Per sentence the state of a hypothesis that has written nothing (None: no constraints); None when no
    sentence has any."""
    if not constraints or not any(constraints):
        return None
    return [ConstraintState(phrases=tuple(tuple(p) for p in c)) if c else None for c in constraints]


def constraint_tokens(constraints: list[list[list[int]]] | None, n: int) -> list[int]:
    """Per sentence the number of tokens its constraints take (0 for none)."""
    if not constraints:
        return [0] * n
    return [sum(len(p) for p in c) for c in constraints]


def unmet_rows(states: list[list[ConstraintState] | None], G: int) -> list[int]:
    """The rows (b * G + g) whose hypotheses have not met all their constraints: they may not end."""
    return [b * G + g for b, rows in enumerate(states) if rows is not None
            for g, s in enumerate(rows) if not s.all_met]


@dataclass(frozen=True, kw_only=True)
class Pool:
    """The candidates of one constrained sentence at one step: values (raw sums), rows (of the old
    state), tokens; `ended`: indices of those that finish (</s> in the top K); `live`: indices of the K
    that stay, best first; `states`: the ConstraintState of each candidate (None for </s> ones)."""

    values: list[float]
    rows: list[int]
    tokens: list[int]
    ended: list[int]
    live: list[int]
    states: list


def extra_candidates(states: list[ConstraintState], row_scores: list[float], row_base: int,
                     best_tokens: list[int]) -> tuple[list[int], list[int]]:
    """(rows, tokens) to score besides the 2K best: for each live row its wanted tokens and its best one."""
    rows, tokens = [], []
    for g, state in enumerate(states):
        if row_scores[g] == NEG_INF:
            continue
        for tok in state.wanted() | {best_tokens[g]}:
            rows.append(row_base + g)
            tokens.append(tok)
    return rows, tokens


def allocate(*, top: list[float], rows: list[int], tokens: list[int], extra: tuple[list[int], list[int], list[float]],
             states: list[ConstraintState], row_base: int, K: int, eos: int) -> Pool:
    """One constrained sentence's step: the 2K best (top, rows, tokens, high to low) and the extra
    candidates (rows, tokens, values) -> which finish and which K stay (dynamic beam allocation)."""
    values, rows, tokens = list(top), list(rows), list(tokens)
    seen = set(zip(rows, tokens))
    for r, tok, v in zip(*extra):
        if (r, tok) not in seen:
            seen.add((r, tok))
            rows.append(r)
            tokens.append(tok)
            values.append(v)
    is_eos = [tok == eos and v != NEG_INF for tok, v in zip(tokens, values)]
    ended = [j for j in range(K) if is_eos[j]]  # as without constraints: </s> in the top K finishes
    cand_states = [None if is_eos[j] else states[rows[j] - row_base].advance(tokens[j]) for j in range(len(rows))]
    live = [j for j in range(len(rows)) if not is_eos[j]]
    live.sort(key=lambda j: -values[j])
    finite = [j for j in live if values[j] != NEG_INF]
    seen_in_bank: dict[int, int] = {}
    stripe = {}  # j -> its rank within its bank (best first)
    for j in finite:
        bank = cand_states[j].met
        stripe[j] = seen_in_bank.get(bank, 0)
        seen_in_bank[bank] = stripe[j] + 1
    order = sorted(finite, key=lambda j: (stripe[j], -cand_states[j].met))  # round-robin, fullest bank first
    chosen = (order + [j for j in live if values[j] == NEG_INF])[:K]
    chosen.sort(key=lambda j: -values[j])
    return Pool(values=values, rows=rows, tokens=tokens, ended=ended, live=chosen, states=cand_states)


def gather_extras(states: list[list[ConstraintState] | None], log_probs, scores) -> list:
    """Per active sentence (rows, tokens, values) of its extra candidates (extra_candidates), scored in one
    read: log_probs (B' G, V) after the controls, scores (B', G) of the rows. None for a sentence without
    constraints."""
    G = scores.size(1)
    best = log_probs.argmax(dim=-1).tolist()  # (B' G,)
    row_scores = scores.tolist()
    found = [None if s is None else extra_candidates(s, row_scores[b], b * G, best[b * G: (b + 1) * G])
             for b, s in enumerate(states)]
    rows = [r for f in found if f is not None for r in f[0]]
    tokens = [t for f in found if f is not None for t in f[1]]
    values = (log_probs[rows, tokens] + scores.view(-1)[rows]).tolist() if rows else []
    out, at = [], 0
    for f in found:
        if f is None:
            out.append(None)
            continue
        n = len(f[0])
        out.append((f[0], f[1], values[at: at + n]))
        at += n
    return out


def check_constraints(constraints, n_sentences: int) -> None:
    """None, or per sentence a list of phrases ([] for none), each a non-blank text of valid UTF-8."""
    if constraints is None:
        return
    shaped = isinstance(constraints, (list, tuple)) and all(
        isinstance(c, (list, tuple)) and all(isinstance(p, str) for p in c) for c in constraints)
    if not shaped:
        raise AiaynError('constraints: give one list of phrases per sentence ([] for none), e.g. [["red car"], []]')
    if len(constraints) != n_sentences:
        raise AiaynError(f"constraints has {len(constraints)} entries for {n_sentences} sentences: give one list of "
                         f"phrases per sentence ([] for none)")
    for i, phrases in enumerate(constraints, start=1):
        for k, phrase in enumerate(phrases, start=1):
            if not phrase.strip():
                raise AiaynError(f"sentence {i}: constraint {k} is blank: give a phrase or leave it out")
            try:
                phrase.encode("utf-8")
            except UnicodeEncodeError:
                raise AiaynError(f"sentence {i}: constraint {k} is not valid UTF-8 text: re-encode it as "
                                 f"UTF-8") from None


def reserved_in(tokenizer, text: str, ids: list[int]) -> str | None:
    """A piece the model reserves in a target text and its ids, with what it is for ("</s> (the end of a
    sentence)"), or None: written literally, or an id the tokenizer gives to a special piece (a Marian
    tokenizer reads "</s>" in text as the end of the sentence)."""
    piece = reserved_piece(text)
    if piece is None:
        specials = {tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id} - {-1}
        special = next((i for i in ids if i in specials), None)
        piece = None if special is None else tokenizer.id_to_piece([special])[0]
    return None if piece is None else reserved_reason(piece)


def encode_constraints(tokenizer, constraints: list[list[str]], numbers: list[int], prefixes: list[list[int]],
                       max_output_len: int, *, unwritable) -> list[list[list[int]]]:
    """Target ids of each sentence's constraints (sentence `numbers`, from 1, for messages), each checked to
    be writable (as target prefixes are; unwritable(tokenizer, text): the characters it cannot write), all
    of them with the prefix checked to fit the output."""
    out = []
    for number, phrases, prefix in zip(numbers, constraints, prefixes):
        ids = tokenizer.encode_target(list(phrases)) if phrases else []
        for k, (phrase, p) in enumerate(zip(phrases, ids), start=1):
            reserved = reserved_in(tokenizer, phrase, p)
            if reserved:
                raise AiaynError(f"sentence {number}: constraint {k}: {reserved} is a piece the model reserves, "
                                 f"not text it writes: leave it out")
            if tokenizer.unk_id in p:
                raise AiaynError(f"sentence {number}: constraint {k}: the model cannot write "
                                 f"{' '.join(unwritable(tokenizer, phrase))} (not in its target vocabulary), so no "
                                 f"translation could contain it: leave them out")
        total = len(prefix) + sum(len(p) for p in ids)
        if total >= max_output_len:
            raise AiaynError(f"sentence {number}: its constraints{' and target prefix' if prefix else ''} take "
                             f"{total} tokens, but outputs are at most {max_output_len} tokens with </s>: give fewer "
                             f"or shorter ones")
        out.append(ids)
    return out

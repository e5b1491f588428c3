"""The diagnostic signals, as one list (SIGNALS): what each reads from a translation, how it is judged
against its threshold, and which of its values are suspect. diagnose() (aiayn.inspect.quality.diagnostics), the
thresholds (aiayn.inspect.quality.thresholds: one field per signal), bench/diagnostics.py and the page
(each fired signal's warning, worded from `page_words`) all go through this list, so a new signal is one
entry here, its default threshold there, and its Korean words in aiayn/web/static/i18n_ko.js.

Signals (and where they come from):
- log_prob: mean log-probability per output token, </s> included ("Seq-Logprob", the strongest simple
  hallucination detector of Guerreiro et al. 2023) -> hallucination when low;
- source_contribution: the share of each output step's prediction that comes from the source rather than
  the target prefix, by ALTI+ token contributions rolled out over the layers (Ferrando et al. 2022;
  aiayn.inspect.contributions), averaged over the output's tokens and </s> (Dale et al. 2023's "ALTI"
  detector: a detached output is written from its own prefix) -> hallucination when low;
- eos_attention: mean cross-attention the output's words give the source's </s> (an attention signal of
  Lee et al. 2019 and Guerreiro et al. 2023: a detached output looks at the end of the source) ->
  hallucination when high;
- uncovered_share: share of the source's words that the output's words, together, attend to with less
  than COVERAGE_MASS (Guerreiro et al.'s "Attn-ign-SRC") -> low_coverage;
- repeat_run: the most times an n-gram of output words, or of output pieces (a loop inside one word),
  follows itself -> repetition;
- source_copy: chrF of the output against the source itself -> copy;
- length_ratio: output words / source words -> length_ratio when outside a range;
- stopped_at_limit: the search reached its length limit without </s> -> stopped_at_limit;
- unknown_share: the source's <unk> and byte pieces -> unknown_input.
Cross-attention: the last layer, heads averaged (as aiayn's alignments), subwords merged into words
(aiayn.inspect.maps.capture: keys summed per word, queries averaged per word).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from aiayn.inspect.maps.capture import word_groups
from aiayn.inspect.quality.thresholds import COVERAGE_MASS, REPEAT_NGRAM_MAX


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What the diagnostics read. src_tokens: source pieces ending in </s>; tgt_tokens: output pieces
    (without </s>); cross: (L, H, T, S) cross-attention, T = len(tgt_tokens) or that + 1 (the </s> step);
    log_prob: summed log-probability of the T steps; source_shares: (T + 1,) per output step (the tokens,
    then </s>) the share of its prediction that comes from the source (ALTI+), None where not measured (a
    model without layers of heads)."""

    source: str
    output: str
    src_tokens: list[str]
    tgt_tokens: list[str]
    cross: np.ndarray
    log_prob: float
    stopped_at_limit: bool = False
    unk_piece: str = "<unk>"
    source_shares: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class Signal:
    """One signal. name: its key in diagnose()'s "signals" and its field in Thresholds; flag: the flag it
    raises; measure: its value for an Evidence; rule: how the value meets the threshold (">", "<", ">=",
    "is", "outside" a [low, high] range); suspect: which values look broken ("high", "low", "both" tails;
    None: a fixed rule, not a measured threshold), the side bench/diagnostics.py takes a tail of;
    settle: how the bench turns a percentile of clean outputs into a threshold; page_words: the page's
    English warning ({value}, {threshold}, {low}, {high} filled in), None where the page's own warnings
    already tell it."""

    name: str
    flag: str
    measure: Callable[[Evidence], float | bool | None]
    rule: str
    suspect: str | None
    settle: Callable[[float], float | int] | None = None
    page_words: str | None = None


def attention_signals(cross: np.ndarray, src_tokens: list[str], tgt_tokens: list[str]) -> tuple[float, float, list]:
    """-> (uncovered_share, eos_attention, the uncovered source words). Rows: the output's words (the </s>
    step left out); columns: the source's words, </s> last."""
    weights = cross[-1].mean(0).astype(np.float64)[: len(tgt_tokens)]  # (T, S) last layer, heads averaged
    src_words, src_groups = word_groups(src_tokens)
    keys = np.stack([weights[:, g].sum(-1) for g in src_groups], axis=-1) if len(weights) else \
        np.zeros((0, len(src_groups)))
    rows = np.stack([keys[g].mean(0) for g in word_groups(tgt_tokens)[1]]) if len(keys) else keys
    has_eos = src_words[-1] == "</s>"
    n_words = len(src_words) - has_eos
    eos = float(rows[:, -1].mean()) if has_eos and len(rows) else (1.0 if has_eos else 0.0)
    mass = rows[:, :n_words].sum(0) if len(rows) else np.zeros(n_words)
    uncovered = [w for w, m in zip(src_words, mass) if m < COVERAGE_MASS]
    return len(uncovered) / max(n_words, 1), eos, uncovered


def repeat_run(words: list[str], max_n: int = REPEAT_NGRAM_MAX) -> int:
    """The most times an n-gram (n <= max_n) of `words` occurs in a row: "a b a b a b" -> 3; no repeat -> 1
    (0 for no words)."""
    best = min(len(words), 1)
    for n in range(1, max_n + 1):
        for start in range(len(words) - n + 1):
            run, gram = 1, words[start: start + n]
            while words[start + run * n: start + (run + 1) * n] == gram:
                run += 1
            best = max(best, run)
    return best


def source_copy(source: str, output: str) -> float:
    """chrF (0-100) of the output against the source itself: near 100 when the output copies it."""
    from sacrebleu.metrics import CHRF

    return round(CHRF().sentence_score(output, [source]).score, 2) if output.strip() else 0.0


def length_ratio(source: str, output: str) -> float:
    return len(output.split()) / max(len(source.split()), 1)


def unknown_share(src_tokens: list[str], unk_piece: str) -> float:
    pieces = [p for p in src_tokens if p != "</s>"]
    bad = sum(p == unk_piece or (p.startswith("<0x") and p.endswith(">")) for p in pieces)
    return bad / max(len(pieces), 1)


def _mean_log_prob(e: Evidence) -> float:
    return e.log_prob / max(e.cross.shape[-2], 1)  # per step, </s> included


def _source_contribution(e: Evidence) -> float | None:
    return None if e.source_shares is None else float(np.mean(e.source_shares))


def _repeats(e: Evidence) -> int:
    pieces = [p.lstrip("▁") for p in e.tgt_tokens]  # "▁und und und": one word, a loop of pieces
    return max(repeat_run(e.output.split()), repeat_run(pieces))


def _rounded(decimals: int) -> Callable[[float], float]:
    return lambda percentile: round(float(percentile), decimals)


SIGNALS = (
    Signal(name="log_prob", flag="hallucination", measure=_mean_log_prob, rule="<", suspect="low",
           settle=_rounded(2),
           page_words="Possible hallucination: the model gives this output a low probability (mean log-probability "
                      "per token {value}; flagged below {threshold})."),
    Signal(name="source_contribution", flag="hallucination", measure=_source_contribution, rule="<", suspect="low",
           settle=_rounded(2),
           page_words="Possible hallucination: little of this output comes from the source (its tokens take {value} "
                      "of what they carry from the source, the rest from the words before them; flagged below "
                      "{threshold})."),
    Signal(name="eos_attention", flag="hallucination",
           measure=lambda e: attention_signals(e.cross, e.src_tokens, e.tgt_tokens)[1], rule=">", suspect="high",
           settle=_rounded(2),
           page_words="Possible hallucination: the output looks mostly at the end of the source (</s> gets {value} "
                      "of its attention; flagged above {threshold})."),
    Signal(name="uncovered_share", flag="low_coverage",
           measure=lambda e: attention_signals(e.cross, e.src_tokens, e.tgt_tokens)[0], rule=">", suspect="high",
           settle=_rounded(2),
           page_words="Part of the source may be left out: a share of {value} of its words gets little attention "
                      "(flagged above {threshold})."),
    Signal(name="repeat_run", flag="repetition", measure=_repeats, rule=">=", suspect="high",
           settle=lambda percentile: max(3, int(percentile) + 1),  # a doubled word is ordinary ("very very")
           page_words="The output repeats itself: a phrase {value} times in a row (flagged at {threshold})."),
    Signal(name="source_copy", flag="copy", measure=lambda e: source_copy(e.source, e.output), rule=">=",
           suspect="high", settle=_rounded(1),
           page_words="The output looks like a copy of the source (similarity {value} of 100; flagged at "
                      "{threshold})."),
    Signal(name="length_ratio", flag="length_ratio", measure=lambda e: length_ratio(e.source, e.output),
           rule="outside", suspect="both", settle=_rounded(2),
           page_words="The output's length is unusual for its source: {value} output words per source word "
                      "(expected {low} to {high})."),
    Signal(name="stopped_at_limit", flag="stopped_at_limit", measure=lambda e: bool(e.stopped_at_limit),
           rule="is", suspect=None),
    Signal(name="unknown_share", flag="unknown_input", measure=lambda e: unknown_share(e.src_tokens, e.unk_piece),
           rule=">", suspect=None),
)

# each flag once, in the order of the signals that raise it
FLAGS = tuple(dict.fromkeys(s.flag for s in SIGNALS))

"""Which cross-attention heads align words: every head (and each layer's mean over its heads) ranked by
alignment error rate against gold word alignments, as Garg et al. (2019) read alignments from attention.

The alignment of a head: the target sentence is forced through the model (teacher forcing, capture's
`target`), subwords are merged into words (aiayn.inspect.maps.capture.merge_subwords: a word's keys summed, its
query rows averaged), and each target word is linked to the source word it attends to most (</s> left
out on both sides), as hard_alignment does.

Without gold alignments a head is described by statistics of its attention over the target words:
  Entropy    of its row over the source words and </s>, divided by log(number of keys): 0 = one key, 1 = flat
  Focus      the largest weight on a source word (</s> left out), averaged
  Agreement  how often its argmax is the layer mean's argmax (1 for the mean itself)
  Coverage   the share of source words that some target word is linked to
and heads are ranked by Score = Focus x Coverage (a focused head that is not stuck on one word). These
say how alignment-like a head looks, not that it aligns the right words: only gold can say that.
"""

from dataclasses import asdict, dataclass

import numpy as np

from aiayn.inspect.alignment.gold import AerCounts, Gold, Link
from aiayn.inspect.maps.capture import capture
from aiayn.inspect.maps.checks import InspectError


@dataclass
class HeadScore:
    layer: int
    head: int | None  # None: the layer's mean over its heads
    aer: float | None  # None without gold
    entropy: float
    focus: float
    agreement: float
    coverage: float

    @property
    def name(self) -> str:
        """"L:H" counted from 1, as the paper, the page and every picture count layers and heads."""
        return f"{self.layer + 1}:{'mean' if self.head is None else self.head + 1}"

    @property
    def score(self) -> float:
        return self.focus * self.coverage

    def to_dict(self) -> dict:
        """The JSON row: layer and head counted from 1, as its name (head None: the layer's mean)."""
        return {"name": self.name, **asdict(self), "layer": self.layer + 1,
                "head": None if self.head is None else self.head + 1, "score": round(self.score, 4)}


@dataclass
class _Stats:
    """Sums over target words (or sentences, for coverage) of one head's statistics."""
    entropy: float = 0.0
    focus: float = 0.0
    agreement: float = 0.0
    coverage: float = 0.0


def argmax_links(weights: np.ndarray, n_src: int, n_tgt: int) -> set[Link]:
    """weights (T, S) over merged words: each target word j < n_tgt -> its likeliest source word i < n_src."""
    return {(int(weights[j, :n_src].argmax()), j) for j in range(n_tgt)}


def _sizes(maps) -> tuple[int, int]:
    n_src = len(maps.source_tokens) - (maps.source_tokens[-1] == "</s>")
    n_tgt = len(maps.target_tokens) - (maps.target_tokens[-1] == "</s>")
    return n_src, n_tgt


def _candidates(cross: np.ndarray):
    """(layer, head or None, (T, S) weights) for every head and every layer's mean."""
    for layer in range(cross.shape[0]):
        for head in range(cross.shape[1]):
            yield layer, head, cross[layer, head]
        yield layer, None, cross[layer].mean(0)


def _add_stats(stats: _Stats, weights: np.ndarray, mean_pick: np.ndarray, n_src: int, n_tgt: int) -> None:
    rows = weights[:n_tgt].astype(np.float64)  # (T', S + 1)
    p = np.clip(rows, 1e-12, 1.0)
    stats.entropy += float((-(p * np.log(p)).sum(-1) / max(np.log(rows.shape[-1]), 1e-12)).sum())
    words = rows[:, :n_src]
    stats.focus += float(words.max(-1).sum())
    stats.agreement += float((words.argmax(-1) == mean_pick).sum())
    stats.coverage += len(set(words.argmax(-1).tolist())) / n_src


class HeadRanking:
    """Accumulates, sentence by sentence, every head's AER counts and statistics."""

    def __init__(self, *, n_layers: int, n_heads: int):
        keys = [(layer, head) for layer in range(n_layers) for head in [*range(n_heads), None]]
        self.counts = {k: AerCounts() for k in keys}
        self.stats = {k: _Stats() for k in keys}
        self.words = self.sentences = 0
        self.has_gold = True

    def add(self, maps, gold: Gold | None) -> None:
        cross = maps.maps["cross"]  # (L, H, T, S), merged words
        n_src, n_tgt = _sizes(maps)
        if n_src == 0 or n_tgt == 0:
            return
        self.has_gold &= gold is not None
        self.words += n_tgt
        self.sentences += 1
        for layer, head, weights in _candidates(cross):
            mean_pick = cross[layer].mean(0)[:n_tgt, :n_src].argmax(-1)
            _add_stats(self.stats[layer, head], weights, mean_pick, n_src, n_tgt)
            if gold is not None:
                self.counts[layer, head].add(argmax_links(weights, n_src, n_tgt), gold)

    def scores(self) -> list[HeadScore]:
        """Best first: lowest AER with gold (ties: higher Score), else highest Score."""
        words, sentences = max(self.words, 1), max(self.sentences, 1)
        out = [HeadScore(layer, head, self.counts[layer, head].aer if self.has_gold else None,
                         s.entropy / words, s.focus / words, s.agreement / words, s.coverage / sentences)
               for (layer, head), s in self.stats.items()]
        if self.has_gold:
            return sorted(out, key=lambda h: (h.aer, -h.score))
        return sorted(out, key=lambda h: -h.score)


def rank_heads(translator, pairs: list[tuple[str, str]],
               golds: list[Gold] | None = None) -> tuple[list[HeadScore], int]:
    """Every cross-attention head and layer mean ranked on teacher-forced pairs (gold: one per pair, word
    indices over the lines split at whitespace). -> (ranking, pairs skipped because the model's words are
    not the lines' whitespace words, so gold indices would point at other words)."""
    ranking, skipped = None, 0
    for index, (src, tgt) in enumerate(pairs):
        maps = capture(translator, src, tgt, merge_words=True)
        if ranking is None:
            layers, heads = maps.maps["cross"].shape[:2]
            ranking = HeadRanking(n_layers=layers, n_heads=heads)
        if golds is not None and _sizes(maps) != (len(src.split()), len(tgt.split())):
            skipped += 1
            continue
        ranking.add(maps, golds[index] if golds is not None else None)
    if ranking is None or ranking.sentences == 0:
        raise InspectError("no sentence pair could be scored: every pair's words differ from the model's "
                           "(subwords merged at ▁); are these the right sentences for this model?")
    return ranking.scores(), skipped

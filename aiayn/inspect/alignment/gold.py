"""Gold word alignments and the alignment error rate (AER).

Gold files are Pharaoh text, one line per sentence pair: whitespace-separated links "i-j" (source word i,
target word j, 0-based, words = the line split at whitespace) for sure links and "i?j" for possible ones;
a blank line is a pair without links. Every sure link is also possible (P includes S).

AER (Och & Ney, 2003), summed over the corpus: 1 - (|A∩S| + |A∩P|) / (|A| + |S|), for hypothesis links A,
sure S and possible P; with only sure links, P = S and AER = 1 - 2|A∩S| / (|A| + |S|).
"""

import re
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import AiaynError

Link = tuple[int, int]
_LINK = re.compile(r"(\d+)([-?])(\d+)")


class GoldError(AiaynError):
    """A gold alignment file that does not fit its sentences: the message names the file and line."""


@dataclass(frozen=True)
class Gold:
    sure: frozenset[Link]
    possible: frozenset[Link]  # includes sure


def parse_links(text: str, where: str = "alignment") -> Gold:
    sure, possible = set(), set()
    for token in text.split():
        match = _LINK.fullmatch(token)
        if match is None:
            raise GoldError(f"{where}: {token!r} is not a link; write i-j (sure) or i?j (possible), 0-based "
                            f"word indices")
        link = (int(match[1]), int(match[3]))
        (sure if match[2] == "-" else possible).add(link)
    return Gold(frozenset(sure), frozenset(possible | sure))


def _check_indices(gold: Gold, n_src: int, n_tgt: int, where: str) -> None:
    for i, j in sorted(gold.possible):
        for side, index, size in (("source", i, n_src), ("target", j, n_tgt)):
            if index >= size:
                raise GoldError(f"{where}: link {i}-{j}: {side} word {index} does not exist (the {side} sentence "
                                f"has {size} words: 0 to {size - 1}); is this the gold file of these sentences?")


def read_gold(path: str | Path, pairs: list[tuple[str, str]]) -> list[Gold]:
    """One Gold per pair, its links checked against the pair's words (the lines split at whitespace)."""
    from aiayn.data.corpus import read_lines

    lines = read_lines(path, allow_empty=True)  # an empty file is 0 lines, counted against the pairs below
    if len(lines) != len(pairs):
        raise GoldError(f"{path}: {len(lines)} lines for {len(pairs)} sentence pairs; give one line of links "
                        f"per pair (a blank line for a pair without links)")
    golds = []
    for number, (line, (src, tgt)) in enumerate(zip(lines, pairs), start=1):
        gold = parse_links(line, f"{path}:{number}")
        _check_indices(gold, len(src.split()), len(tgt.split()), f"{path}:{number}")
        golds.append(gold)
    return golds


@dataclass
class AerCounts:
    """The four counts of AER, summed over sentences (AER is a corpus-level ratio, not a mean of ratios)."""
    hypothesis: int = 0
    sure: int = 0
    hit_sure: int = 0
    hit_possible: int = 0

    def add(self, links: set[Link], gold: Gold) -> None:
        self.hypothesis += len(links)
        self.sure += len(gold.sure)
        self.hit_sure += len(links & gold.sure)
        self.hit_possible += len(links & gold.possible)

    @property
    def aer(self) -> float:
        total = self.hypothesis + self.sure
        return 0.0 if total == 0 else 1.0 - (self.hit_sure + self.hit_possible) / total


def aer(hypotheses: list[set[Link]], golds: list[Gold]) -> float:
    """Corpus AER of hypothesis links against gold (Och & Ney, 2003); 0 is a perfect alignment."""
    if len(hypotheses) != len(golds):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(golds)} gold alignments")
    counts = AerCounts()
    for links, gold in zip(hypotheses, golds):
        counts.add(set(links), gold)
    return counts.aer

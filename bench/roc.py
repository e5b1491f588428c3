"""AUROC by the Mann-Whitney statistic: the chance that a random positive scores above a random negative
(ties count half), for judging a detector without choosing its threshold."""

import numpy as np

from aiayn.errors import AiaynError


def auroc(positives, negatives) -> float:
    """Scores of the positive and negative cases (higher = more likely positive) -> AUROC in [0, 1]."""
    pos, neg = np.asarray(positives, dtype=np.float64), np.asarray(negatives, dtype=np.float64)
    if not len(pos) or not len(neg):
        raise AiaynError("AUROC needs at least one positive and one negative case")
    ranks = _mid_ranks(np.concatenate([pos, neg]))
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2  # positives' rank sum less its minimum
    return float(u / (len(pos) * len(neg)))


def _mid_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start: end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


class Resampler:
    """Draws bootstrap resamples of n cases: the cases themselves with replacement, or, given groups (one label
    per case: the source sentence an output came from), whole groups with replacement, so that outputs of one
    sentence (which hallucinate together) come and go together."""

    def __init__(self, n: int, groups=None):
        self.n = n
        self.members = None if groups is None else \
            [np.flatnonzero(np.asarray(groups) == g) for g in dict.fromkeys(groups)]  # (cases of each group)

    def draw(self, rng) -> np.ndarray:
        """The indices of one resample."""
        if self.members is None:
            return rng.integers(0, self.n, self.n)
        return np.concatenate([self.members[k] for k in rng.integers(0, len(self.members), len(self.members))])


def auroc_interval(positives, negatives, *, positive_groups=None, negative_groups=None, resamples: int = 1000,
                   level: float = 0.95, seed: int = 0):
    """(low, high): the percentile bootstrap interval of the AUROC, positives and negatives resampled
    separately with replacement (by group where groups are given: Resampler); wide when either side is small
    (a handful of hallucinations)."""
    pos, neg = np.asarray(positives, dtype=np.float64), np.asarray(negatives, dtype=np.float64)
    draw_pos, draw_neg = Resampler(len(pos), positive_groups), Resampler(len(neg), negative_groups)
    rng = np.random.default_rng(seed)
    values = [auroc(pos[draw_pos.draw(rng)], neg[draw_neg.draw(rng)]) for _ in range(resamples)]
    low, high = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)


def auroc_difference_interval(positives_a, negatives_a, positives_b, negatives_b, *, positive_groups=None,
                              negative_groups=None, resamples: int = 1000, level: float = 0.95, seed: int = 0):
    """(low, high): the paired percentile bootstrap interval of AUROC(a) - AUROC(b), two scores of the same
    cases (positives_a[i] and positives_b[i] score one case): each resample draws the same cases for both (by
    group where groups are given: Resampler), so the interval says whether a beats b on these cases, where two
    separate intervals that overlap cannot."""
    pos_a, neg_a = np.asarray(positives_a, dtype=np.float64), np.asarray(negatives_a, dtype=np.float64)
    pos_b, neg_b = np.asarray(positives_b, dtype=np.float64), np.asarray(negatives_b, dtype=np.float64)
    draw_pos, draw_neg = Resampler(len(pos_a), positive_groups), Resampler(len(neg_a), negative_groups)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        i, j = draw_pos.draw(rng), draw_neg.draw(rng)
        values.append(auroc(pos_a[i], neg_a[j]) - auroc(pos_b[i], neg_b[j]))
    low, high = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)

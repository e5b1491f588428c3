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

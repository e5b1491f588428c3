"""The combined score: one logistic regression over the measured signals, fitted on a model's own validation
outputs (clean) against hallucinations injected into them and found on their perturbed sources
(aiayn.inspect.quality.injection), stored in thresholds.json beside the model by `aiayn calibrate` and
reported by the diagnostics as "combined".

Each signal's value is first turned into a suspicion, higher = more suspect (the value where high values are
suspect, its negative where low ones are, and for the length ratio, suspect on both sides, its distance in
log from its usual value on validation, the median); the suspicions are standardized with their mean and
standard deviation over the fit's outputs, and the score is the regression's log-odds of a hallucination:

    score = sum_j w_j * (suspicion_j - mean_j) / scale_j + bias

Each class is a list of groups (clean: the model's own validation outputs, and the outputs of slightly
perturbed sources that stayed close to them; hallucinated: the forced kinds injected into them, and the
natural hallucinations of the perturbed sources); the two classes weigh the same, and so do the groups of a
class, whatever their sizes, and the weights get a small ridge. The natural groups are there because a score
fitted on the forced kinds alone leans on what sets a forced output apart from the model's own search (its
low log-probability): on Multi30k test it ranked natural hallucinations at 0.879 AUROC, below log_prob's
0.944 (bench/combined_fits.py). Everything the score needs is stored, so it can be recomputed from a
`--diagnostics` line's signal values alone (they are rounded to 4 decimals; the score is computed from the
rounded values, so the line and the recomputation agree).
"""

from dataclasses import asdict, dataclass

import numpy as np

from aiayn.errors import AiaynError

RIDGE = 1e-2  # on the standardized weights (not the bias): keeps Newton's steps finite on separable data
NEWTON_STEPS = 50
SIDES = ("low", "high", "both")
FLOOR = 1e-3  # the least value (and usual value) a "both" signal is read as: its log stays finite (an untrained
# model's empty outputs have a length ratio of 0, and their median too)
# the page's words when the combined score fires (English; the page's dictionary has the other languages)
PAGE_WORDS = ("Possible hallucination: the signals taken together score {value} (the combined score fitted on "
              "this model's validation data; flagged over {threshold}).")


@dataclass(frozen=True, kw_only=True)
class Combined:
    """A fitted combined score. signals: the signal names it reads, in order; suspect: each one's suspect side
    ("low", "high", "both"); usual: each one's usual value (the validation median, for "both"; None
    otherwise); mean, scale: the suspicions' mean and standard deviation over the fit's outputs, weighed as in
    the fit; weights: the regression's weight per standardized suspicion; bias: its intercept; threshold: the
    score above which the output is flagged a hallucination; clean, hallucinations: how many validation
    outputs of each class it was fitted on."""

    signals: tuple[str, ...]
    suspect: tuple[str, ...]
    usual: tuple[float | None, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float
    clean: int
    hallucinations: int

    def to_dict(self) -> dict:
        """Every field, as thresholds.json's "combined" holds it (the tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def scores(self, x: np.ndarray) -> np.ndarray:
        """Suspicions (N, F) in `signals`' order -> the score of each, (N,)."""
        return (x - np.array(self.mean)) / np.array(self.scale) @ np.array(self.weights) + self.bias

    def score_of(self, diagnostics: dict) -> float | None:
        """The score of one diagnose() result (its signals' values); None where one of its signals was not
        measured (source_contribution, for a model without layers of heads)."""
        signals = diagnostics.get("signals", {})
        if not all(name in signals for name in self.signals):
            return None
        return float(self.scores(suspicions([diagnostics], self))[0])


def suspicion(side: str, value: float, usual: float | None) -> float:
    """A signal's value as a score where higher means more suspect (side "both": its distance, in log, from
    its usual value)."""
    if side == "low":
        return -float(value)
    if side == "both":
        return abs(float(np.log(max(float(value), FLOOR) / max(usual, FLOOR))))
    return float(value)


def suspicions(diagnostics: list[dict], combined) -> np.ndarray:
    """(N, F): each of `combined`'s signals' suspicion (combined: anything with signals, suspect and usual)."""
    rows = [[suspicion(side, d["signals"][name]["value"], usual)
             for name, side, usual in zip(combined.signals, combined.suspect, combined.usual)] for d in diagnostics]
    return np.array(rows, dtype=np.float64).reshape(len(diagnostics), len(combined.signals))


def group_weights(sizes: list[int], groups_of_class: list[int]) -> np.ndarray:
    """Per-sample weights, (sum of sizes,): the groups' samples in order, each class summing to 1/2 and each
    non-empty group of a class to an equal share of it. groups_of_class[g]: the class (0 or 1) of group g."""
    weights = []
    for size, label in zip(sizes, groups_of_class):
        groups = sum(1 for n, c in zip(sizes, groups_of_class) if c == label and n)
        weights.append(np.full(size, 0.5 / max(groups, 1) / max(size, 1)))
    return np.concatenate(weights) if weights else np.zeros(0)


def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logistic regression by Newton's method, each sample weighed by `weight`, a ridge of RIDGE on the weights:
    x (N, F), y (N,) of 0/1, weight (N,) -> (mean (F,), scale (F,), w (F + 1,), the bias last), on standardized
    x (standardized by the weighted mean and standard deviation, so a group written twice fits the same). At the
    optimum the weighted, ridged gradient is zero."""
    share = weight / weight.sum()
    mean = share @ x
    scale = np.sqrt(share @ (x - mean) ** 2) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])  # (N, F + 1)
    ridge = np.diag([RIDGE] * x.shape[1] + [0.0])
    w = np.zeros(z.shape[1])
    for _ in range(NEWTON_STEPS):
        p = 1 / (1 + np.exp(-z @ w))
        gradient = z.T @ (weight * (p - y)) + ridge @ w
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + ridge
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return mean, scale, w


@dataclass(frozen=True, kw_only=True)
class _Features:
    signals: tuple[str, ...]
    suspect: tuple[str, ...]
    usual: tuple[float | None, ...]


def fit_combined(clean: list[list[dict]], hallucinated: list[list[dict]], sides: dict[str, str]) -> Combined | None:
    """The combined score over `sides`' signals (name -> suspect side) that every result measured, fitted on
    groups of diagnose() results: clean ones (0; the first group: the model's own outputs, whose median is a
    "both" signal's usual value) and hallucinated ones (1), each class weighing the same and each non-empty
    group of a class an equal share of it (group_weights); its threshold is left at +inf (no flag) until the
    calibration settles it (calibration.thresholds_at). None where either class, or the first clean group, is empty."""
    negatives, positives = [d for g in clean for d in g], [d for g in hallucinated for d in g]
    if not clean or not clean[0] or not positives:
        return None
    names = tuple(n for n in sides if all(n in d["signals"] for d in negatives + positives))
    usual = tuple(max(float(np.median([d["signals"][n]["value"] for d in clean[0]])), FLOOR)
                  if sides[n] == "both" else None for n in names)
    features = _Features(signals=names, suspect=tuple(sides[n] for n in names), usual=usual)
    groups = [*clean, *hallucinated]
    x = np.vstack([suspicions(negatives, features), suspicions(positives, features)])
    y = np.concatenate([np.zeros(len(negatives)), np.ones(len(positives))])
    weight = group_weights([len(g) for g in groups], [0] * len(clean) + [1] * len(hallucinated))
    mean, scale, w = fit_logistic(x, y, weight)
    return Combined(signals=names, suspect=features.suspect, usual=usual, mean=tuple(map(float, mean)),
                    scale=tuple(map(float, scale)), weights=tuple(map(float, w[:-1])), bias=float(w[-1]),
                    threshold=float("inf"), clean=len(negatives), hallucinations=len(positives))


def _numbers(where: str, data: dict, name: str, n: int, *, none_ok: bool = False) -> tuple:
    value = data.get(name)
    ok = isinstance(value, list) and len(value) == n and all(
        (x is None and none_ok) or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in value)
    if not ok:
        raise AiaynError(f"{where}: combined.{name} is {value!r}, not a list of {n} numbers (one per signal); "
                         f"run `aiayn calibrate` on the model again, or delete the file to use the defaults")
    return tuple(None if x is None else float(x) for x in value)


def _number(where: str, data: dict, name: str, kind=float):
    value = data.get(name)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or (kind is int and value != int(value)):
        raise AiaynError(f"{where}: combined.{name} is {value!r}, not a number; run `aiayn calibrate` on the "
                         f"model again, or delete the file to use the defaults")
    return kind(value)


def combined_from_dict(where: str, data, known: tuple[str, ...]) -> Combined:
    """thresholds.json's "combined" object, checked field by field (where: the file, for the one-line error;
    known: the signals a score may read)."""
    if not isinstance(data, dict):
        raise AiaynError(f"{where}: \"combined\" is not an object; run `aiayn calibrate` on the model again, or "
                         f"delete the file to use the defaults")
    signals = data.get("signals")
    if not isinstance(signals, list) or not signals or not all(isinstance(s, str) and s in known for s in signals):
        raise AiaynError(f"{where}: combined.signals is {signals!r}, not a list of signal names (known: "
                         f"{', '.join(known)}); run `aiayn calibrate` on the model again")
    suspect = data.get("suspect")
    if not isinstance(suspect, list) or len(suspect) != len(signals) or not all(s in SIDES for s in suspect):
        raise AiaynError(f"{where}: combined.suspect is {suspect!r}, not one of {', '.join(SIDES)} per signal; "
                         f"run `aiayn calibrate` on the model again")
    usual = _numbers(where, data, "usual", len(signals), none_ok=True)
    if any((u is None or u <= 0) for u, side in zip(usual, suspect) if side == "both"):
        raise AiaynError(f"{where}: combined.usual needs a positive number for each signal suspect on both sides; "
                         f"run `aiayn calibrate` on the model again")
    scale = _numbers(where, data, "scale", len(signals))
    if any(s <= 0 for s in scale):
        raise AiaynError(f"{where}: combined.scale is {list(scale)!r}: each signal's spread must be above 0; run "
                         f"`aiayn calibrate` on the model again")
    return Combined(signals=tuple(signals), suspect=tuple(suspect), usual=usual,
                    mean=_numbers(where, data, "mean", len(signals)), scale=scale,
                    weights=_numbers(where, data, "weights", len(signals)), bias=_number(where, data, "bias"),
                    threshold=_number(where, data, "threshold"), clean=_number(where, data, "clean", int),
                    hallucinations=_number(where, data, "hallucinations", int))

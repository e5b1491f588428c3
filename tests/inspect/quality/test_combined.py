"""The combined score: the fit is at the regression's optimum, the stored score is that regression's log-odds
recomputed from a diagnostics line's own signal values, it round-trips through JSON, and the calibration
settles its threshold within the flag budget."""

import json
from dataclasses import replace

import numpy as np
import pytest

from aiayn.errors import AiaynError
from aiayn.inspect.quality import calibration
from aiayn.inspect.quality.combined import (
    RIDGE,
    combined_from_dict,
    fit_combined,
    fit_logistic,
    group_weights,
    suspicions,
)
from aiayn.inspect.quality.diagnostics import diagnose, flags_under
from aiayn.inspect.quality.signals import Evidence
from aiayn.inspect.quality.thresholds import SIGNAL_FIELDS

SRC = ["▁ein", "▁Hund", "▁läuft", "</s>"]
TGT = ["▁a", "▁dog", "▁runs"]
SIDES = {s.name: s.suspect for s in calibration.MEASURED}


def evidences(n: int, rng, log_prob: float, share: float) -> list[Evidence]:
    """n outputs of "ein Hund läuft" whose log-probability, source share and attention vary at random."""
    words = ["a", "dog", "runs", "the", "cat", "sleeps", "fast"]
    base = np.full((4, 4), 0.05) + np.eye(4)
    return [Evidence(source="ein Hund läuft", output=" ".join(rng.choice(words, 3)),
                     src_tokens=SRC, tgt_tokens=TGT,
                     cross=np.broadcast_to(base + rng.uniform(0, 0.5, (4, 4)), (2, 2, 4, 4)).copy(),
                     log_prob=float(rng.normal(log_prob, 0.5)) * 4, source_shares=rng.uniform(share - 0.1, share, 4))
            for _ in range(n)]


@pytest.fixture(scope="module")
def fitted():
    """Clean outputs and hallucinated ones (lower log-probability and source share) -> (clean diagnostics,
    their evidences, the combined score fitted on them, the calibrated thresholds)."""
    rng = np.random.default_rng(0)
    clean_evidence = evidences(300, rng, -0.8, 0.6)
    clean = [diagnose(e) for e in clean_evidence]
    hallucinated = [diagnose(e) for e in evidences(200, rng, -2.0, 0.45)]
    combined = fit_combined([clean], [hallucinated], SIDES)
    thresholds, _ = calibration.thresholds_on(clean, combined)
    return clean, clean_evidence, combined, thresholds


def test_the_fit_is_the_optimum_of_the_weighted_ridged_likelihood():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 3)) * [1.0, 5.0, 0.1]
    y = (x @ [1.0, -0.2, 3.0] + rng.normal(size=300) > 0.5).astype(float)
    weight = np.where(y == 1, 0.5 / y.sum(), 0.5 / (1 - y).sum())
    mean, scale, w = fit_logistic(x, y, weight)
    z = np.hstack([(x - mean) / scale, np.ones((300, 1))])
    p = 1 / (1 + np.exp(-z @ w))
    gradient = z.T @ (weight * (p - y)) + RIDGE * np.append(w[:-1], 0.0)
    assert np.abs(gradient).max() < 1e-9
    by_weight = weight / weight.sum()
    assert np.allclose(mean, by_weight @ x) and np.allclose(scale, np.sqrt(by_weight @ (x - mean) ** 2), rtol=1e-6)


def test_each_group_of_a_class_weighs_the_same_whatever_its_size():
    weight = group_weights([3, 0, 1, 4, 2], [0, 0, 0, 1, 1])
    assert np.allclose(weight, [1 / 12] * 3 + [1 / 4] + [1 / 16] * 4 + [1 / 8] * 2)


def test_a_group_written_twice_fits_the_same_score(fitted):
    """Doubling every output of one hallucinated group changes no weight of the fit: the groups weigh the same
    whatever their sizes."""
    clean, _, _, _ = fitted
    rng = np.random.default_rng(3)
    forced = [diagnose(e) for e in evidences(60, rng, -2.5, 0.55)]
    natural = [diagnose(e) for e in evidences(15, rng, -1.4, 0.4)]
    once = fit_combined([clean], [forced, natural], SIDES)
    twice = fit_combined([clean], [forced, natural * 2], SIDES)
    x = suspicions(clean + forced + natural, once)
    assert np.allclose(once.scores(x), twice.scores(x), atol=1e-6)
    assert not np.allclose(once.scores(x), fit_combined([clean], [forced + natural], SIDES).scores(x), atol=1e-3)


def test_the_reported_score_is_the_regression_recomputed_from_the_reported_values(fitted):
    clean, clean_evidence, combined, thresholds = fitted
    found = diagnose(clean_evidence[0], thresholds)
    by_hand = combined.bias
    for name, side, usual, mean, scale, w in zip(combined.signals, combined.suspect, combined.usual, combined.mean,
                                                 combined.scale, combined.weights):
        value = found["signals"][name]["value"]
        s = {"low": -value, "high": value, "both": abs(np.log(max(value, 1e-3) / (usual or 1.0)))}[side]
        by_hand += w * (s - mean) / scale
    assert found["combined"]["value"] == pytest.approx(by_hand, abs=1e-4)
    assert found["combined"]["threshold"] == thresholds.combined.threshold
    assert found["combined"]["flagged"] == (by_hand > thresholds.combined.threshold)


def test_the_stored_score_is_the_fitted_regressions_log_odds(fitted):
    clean, _, combined, _ = fitted
    x = suspicions(clean, combined)
    mean, scale, w = fit_logistic(np.vstack([x, x[:5] - 3]), np.r_[np.zeros(len(x)), np.ones(5)],
                                  group_weights([len(x), 5], [0, 1]))
    refit = replace(combined, mean=tuple(mean), scale=tuple(scale), weights=tuple(w[:-1]), bias=float(w[-1]))
    direct = np.hstack([(x - mean) / scale, np.ones((len(x), 1))]) @ w
    assert np.allclose(refit.scores(x), direct, atol=1e-12)


def test_the_score_round_trips_through_json(fitted):
    _, _, _, thresholds = fitted
    stored = json.loads(json.dumps(thresholds.combined.to_dict()))
    assert combined_from_dict("thresholds.json", stored, SIGNAL_FIELDS) == thresholds.combined


def test_the_calibration_counts_the_combined_flag_in_the_budget(fitted):
    clean, clean_evidence, combined, thresholds = fitted
    assert combined.weights[0] > 0  # a low log-probability (high suspicion) makes a hallucination likelier
    assert np.isfinite(thresholds.combined.threshold)
    assert 0 < calibration.flagged_share(clean, thresholds) <= calibration.FLAG_BUDGET
    judged = [diagnose(e, thresholds) for e in clean_evidence]
    assert [flags_under(d, thresholds) for d in clean] == [d["flags"] for d in judged]
    assert any(d["combined"]["flagged"] for d in judged)  # its own tail of the clean outputs
    assert all("hallucination" in d["flags"] for d in judged if d["combined"]["flagged"])


def test_a_score_needs_every_signal_it_reads(fitted):
    _, clean_evidence, _, thresholds = fitted
    without = diagnose(replace(clean_evidence[0], source_shares=None), thresholds)
    assert "combined" not in without and "source_contribution" not in without["signals"]


@pytest.mark.parametrize("change, needle", [({"weights": [1.0]}, "combined.weights"),
                                            ({"signals": ["loudness"]}, "combined.signals"),
                                            ({"suspect": ["up"] * 7}, "combined.suspect"),
                                            ({"scale": [0.0] * 7}, "combined.scale"),
                                            ({"threshold": "high"}, "combined.threshold")])
def test_a_damaged_score_is_one_line_naming_the_field(fitted, change, needle):
    stored = {**fitted[3].combined.to_dict(), **change}
    with pytest.raises(AiaynError, match=needle) as err:
        combined_from_dict("m/thresholds.json", stored, SIGNAL_FIELDS)
    assert str(err.value).startswith("m/thresholds.json: ") and "\n" not in str(err.value)


def test_the_page_warns_when_the_combined_score_fires_and_only_then(fitted):
    from aiayn.web.diagnosed import page_warnings

    _, clean_evidence, _, thresholds = fitted
    judged = [diagnose(e, thresholds) for e in clean_evidence]
    for found in judged:
        combined = [w for w in page_warnings(found) if w["code"] == "diag_combined"]
        assert len(combined) == found["combined"]["flagged"]
        if combined:
            assert combined[0]["value"] == found["combined"]["value"]
            assert combined[0]["threshold"] == thresholds.combined.threshold
            assert "{value}" in combined[0]["words"] and "{threshold}" in combined[0]["words"]
    assert any(d["combined"]["flagged"] for d in judged) and not all(d["combined"]["flagged"] for d in judged)


def test_empty_outputs_of_an_untrained_model_give_a_finite_score():
    """Clean outputs all empty (length ratio 0, its median 0): the length ratio's suspicion stays finite, and
    so do the fitted score and a stored file's score with a usual value of 0."""
    rng = np.random.default_rng(2)
    empty = [replace(e, output="", tgt_tokens=[]) for e in evidences(20, rng, -3.0, 0.5)]
    clean = [diagnose(e) for e in empty]
    assert all(d["signals"]["length_ratio"]["value"] == 0 for d in clean)
    combined = fit_combined([clean], [[diagnose(e) for e in evidences(20, rng, -1.0, 0.5)]], SIDES)
    assert combined is not None and np.isfinite(combined.scores(suspicions(clean, combined))).all()
    stored = replace(combined, usual=tuple(0.0 if u is not None else None for u in combined.usual))
    assert np.isfinite(stored.scores(suspicions(clean, stored))).all()

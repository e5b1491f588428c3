"""A model's own diagnostic thresholds: each measured signal's tail of the model's outputs on its validation
sources, stored beside its weights (thresholds.json) and read back by the diagnostics.

The defaults of aiayn.inspect.quality.thresholds come from one Multi30k model; another model's outputs sit
elsewhere (a small model's right answers have a lower log-probability, a short output takes less from its
prefix), so its clean outputs would be flagged, or its broken ones let through. The rule is the one the
defaults were chosen by: for each signal with a suspect side, the share q of clean validation outputs that
crosses it (the q-th percentile where low values are bad, the (100-q)-th where high, q/2 on each side of the
length ratio), q the largest of 1.0%, 0.9%, ... 0.1% for which all flags together fire on at most
FLAG_BUDGET of the validation outputs. The fixed rules (stopped_at_limit, unknown_share) keep their defaults.

The combined score (aiayn.inspect.quality.combined) is fitted on the same validation outputs and on the
outputs of their sources slightly perturbed that stayed close (clean), against the hallucinations injected
into them and the natural hallucinations of the perturbed sources, as bench/diagnostics.py makes them
(aiayn.inspect.quality.injection, a fixed seed); its threshold is its own tail of the same size q of the
model's own clean outputs, counted in the same budget; it is stored in the same file.
"""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError
from aiayn.inspect.quality.combined import Combined, fit_combined, suspicions
from aiayn.inspect.quality.diagnostics import flags_under
from aiayn.inspect.quality.signals import SIGNALS
from aiayn.inspect.quality.thresholds import DEFAULT_THRESHOLDS, THRESHOLDS_FILE, Thresholds

FLAG_BUDGET = 0.04  # the share of clean validation outputs all flags together may raise
TAILS = tuple(round(x / 10, 1) for x in range(10, 0, -1))  # percent: 1.0, 0.9, ... 0.1
CALIBRATION_SENTENCES = 500  # validation sources translated (the first N): enough for a 0.1% tail's order
MEASURED = tuple(s for s in SIGNALS if s.suspect is not None)
INJECTION_SEED = 0  # the injected hallucinations' choices: fixed, so the same model and data give the same file
CLOSE_PER_KIND = 100  # perturbed outputs that stayed close, per natural kind, among the clean outputs of the fit


def signal_values(diagnostics: list[dict], name: str) -> np.ndarray:
    """One signal's values over diagnose() results, (N,)."""
    return np.array([d["signals"][name]["value"] for d in diagnostics], dtype=np.float64)


def _measured_on(diagnostics: list[dict]) -> tuple:
    """The measured signals every result has (source_contribution is missing for a model without heads)."""
    return tuple(s for s in MEASURED if all(s.name in d["signals"] for d in diagnostics))


def threshold_at(signal, values: np.ndarray, tail: float):
    """A signal's `tail` (a percentage) on the suspect side of clean values, settled into a threshold (both
    sides: tail/2 on each, a (low, high) pair)."""
    if signal.suspect == "both":
        return tuple(signal.settle(p) for p in np.percentile(values, [tail / 2, 100 - tail / 2]))
    return signal.settle(np.percentile(values, tail if signal.suspect == "low" else 100 - tail))


def thresholds_at(clean: list[dict], tail: float, combined: Combined | None = None) -> Thresholds:
    """Each measured signal's `tail` (a percentage) on clean outputs' diagnostics, and the combined score's
    where one is given (its threshold: the same tail of its scores on them); the others' defaults."""
    if combined is not None:
        scores = combined.scores(suspicions(clean, combined))
        combined = replace(combined, threshold=round(float(np.percentile(scores, 100 - tail)), 4))
    return replace(DEFAULT_THRESHOLDS, combined=combined,
                   **{s.name: threshold_at(s, signal_values(clean, s.name), tail) for s in _measured_on(clean)})


def flagged_share(clean: list[dict], thresholds: Thresholds) -> float:
    """The share of clean outputs that raise any flag under `thresholds`."""
    return float(np.mean([bool(flags_under(d, thresholds)) for d in clean]))


def thresholds_on(clean: list[dict], combined: Combined | None = None) -> tuple[Thresholds, float]:
    """-> (the thresholds of the largest tail that keeps the flagged share of `clean` (diagnose() results of
    the model's own validation outputs, blank lines left out) within FLAG_BUDGET, that tail in percent);
    with `combined`, its threshold settled by the same tail and its flag counted in the budget."""
    clean = [d for d in clean if d["signals"]]
    if not clean:
        raise AiaynError("no validation output to calibrate on: the validation sources are all blank")
    for tail in TAILS:
        thresholds = thresholds_at(clean, tail, combined)
        if flagged_share(clean, thresholds) <= FLAG_BUDGET:
            break
    return thresholds, tail


def combined_on(translator, sources: list[str], translations) -> Combined | None:
    """The combined score fitted on the model's validation sources and their clean Translations (with
    diagnostics): clean, those outputs and the outputs of perturbed sources that stayed close; hallucinated,
    the forced kinds injected into them and the natural hallucinations of the perturbed sources
    (aiayn.inspect.quality.injection). None where there are fewer than two clean outputs or no hallucination
    (its threshold is settled by thresholds_on)."""
    from aiayn.inspect.quality.injection import HALLUCINATIONS, injected, natural_search

    kept = [(s, t) for s, t in zip(sources, translations) if t.diagnostics["signals"]]
    if len(kept) < 2:
        return None
    sources, translations = [s for s, _ in kept], [t for _, t in kept]
    kinds = injected(translator, sources, translations, DEFAULT_THRESHOLDS, INJECTION_SEED, kinds=HALLUCINATIONS)
    found, close = natural_search(translator, sources, [t.text for t in translations], DEFAULT_THRESHOLDS,
                                  INJECTION_SEED, CLOSE_PER_KIND)
    forced, natural = [d for k in HALLUCINATIONS for d in kinds[k]], [d for k in found for _, d in found[k]]
    return fit_combined([[t.diagnostics for t in translations], [d for _, d in close]], [forced, natural],
                        {s.name: s.suspect for s in MEASURED})


def calibrate(translator, sources: list[str]) -> dict:
    """Translate `sources` (the model's validation sources) with diagnostics, fit the combined score and settle
    the thresholds -> {"thresholds": {signal: value}, "combined" (where fitted), "tail_percent", "sentences",
    "flagged_share"}, as thresholds.json holds."""
    from aiayn.inspect.quality.diagnostics import translate_diagnosed

    translations = translate_diagnosed(translator, sources, thresholds=DEFAULT_THRESHOLDS)
    clean = [r.diagnostics for r in translations]
    thresholds, tail = thresholds_on(clean, combined_on(translator, sources, translations))
    clean = [d for d in clean if d["signals"]]
    values = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(thresholds).items() if k != "combined"}
    stored = {} if thresholds.combined is None else {"combined": thresholds.combined.to_dict()}
    return {"thresholds": values, **stored, "tail_percent": tail, "sentences": len(clean),
            "flagged_share": round(flagged_share(clean, thresholds), 4)}


def validation_sources(data, limit: int = CALIBRATION_SENTENCES) -> list[str]:
    """The first `limit` validation sources of a model's data config (its config.yaml's data section)."""
    from itertools import islice

    from aiayn.data.datasets import iter_pairs

    sources = [src for src, _ in islice(iter_pairs(data, "valid"), limit)]
    if not sources:
        raise AiaynError(f"the model's validation data ({data.dataset}) has no sentences to calibrate on")
    return sources


def write_thresholds(model_dir: str | Path, calibration: dict) -> Path:
    """calibrate()'s result into model_dir/thresholds.json; -> that path."""
    from aiayn.io import write_text_atomic

    path = Path(model_dir) / THRESHOLDS_FILE
    write_text_atomic(path, json.dumps(calibration, indent=2) + "\n")
    return path


def calibrate_model(model: str | Path, *, data_dir: str | None = None, src_file: str | None = None,
                    limit: int = CALIBRATION_SENTENCES, device: str = "cpu") -> tuple[Path, dict]:
    """`aiayn calibrate`: a model's thresholds from its validation sources (src_file's lines, else its
    config's validation data, Multi30k read from data_dir where given), stored in its directory ->
    (the thresholds file, calibrate()'s result)."""
    from aiayn.checkpoint import load_config_file
    from aiayn.data.corpus import read_lines
    from aiayn.decoding.translator import Translator
    from aiayn.run_dir import resolve_model_dir

    model_dir = resolve_model_dir(model)
    if src_file is not None:
        sources = read_lines(src_file)[:limit]
        if not any(s.strip() for s in sources):
            raise AiaynError(f"{src_file}: no sentences to calibrate on; give the model's validation sources, "
                             f"one a line")
    else:
        data = load_config_file(model_dir).data
        if data_dir is not None:
            data.data_dir = data_dir
        sources = validation_sources(data, limit)
    translator = Translator.from_pretrained(model_dir, device=device)
    calibration = calibrate(translator, sources)
    return write_thresholds(model_dir, calibration), calibration

"""The thresholds of the translation diagnostics (aiayn.inspect.quality.signals), in one place.

How they were chosen: bench/diagnostics.py translates Multi30k's val split (de->en, the model of
docs/guides/diagnostics.md) and, for each continuous signal, takes the value that a share q of those
clean outputs cross (the (100-q)-th percentile, or the q-th where low values are bad; both q/2 tails for
the length ratio), rounded; q is the largest of 1.0%, 0.9%, ... for which all flags together fire on at
most 4% of val (0.7% for that model). The test split is kept for the reported figures (AUROC per injected pathology,
false flags on clean outputs), so no threshold saw the data it is judged on. The few fixed rules
(COVERAGE_MASS, UNKNOWN_SHARE, REPEAT_NGRAM_MAX) come from the literature or from the page's existing
warning, and say so. A model far from that one (another language pair, domain or size) should re-run the
script on its own validation data and pass its own Thresholds; `aiayn calibrate` (and training, at its end)
stores a model's own thresholds beside it (aiayn.inspect.quality.calibration), which its diagnostics then
use. source_contribution's default comes from the
same rule on a smaller Multi30k de->en model (4+4 layers, d_model 128: its 0.8% tail of val), measured after
the others.
"""

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

from aiayn.checkpoint import THRESHOLDS_FILE  # a model's own thresholds (aiayn calibrate), beside its weights
from aiayn.errors import AiaynError
from aiayn.inspect.quality.combined import Combined, combined_from_dict

# A source word counts as attended when the output's words give it at least this much cross-attention
# mass in all (summed over output words; last layer, heads averaged). 0.2 is the cut-off of
# Guerreiro et al. 2023's "Attn-ign-SRC" detector.
COVERAGE_MASS = 0.2

# "input made of unknown/byte pieces": the share of the source's pieces that are <unk> or byte pieces,
# the same rule as the page's "mostly unknown" warning (more than half).
UNKNOWN_SHARE = 0.5

# repetition: n-grams of 1..REPEAT_NGRAM_MAX words looked for in consecutive runs.
REPEAT_NGRAM_MAX = 4


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """Each signal's threshold, one field per signal of aiayn.inspect.quality.signals.SIGNALS, named as it (see the
    module's docstring for how the defaults were chosen).

    log_prob: hallucination when the mean log-probability per output token (</s> included) is below this.
    source_contribution: hallucination when the output's steps take less than this share from the source.
    eos_attention: hallucination when the output's mean cross-attention on the source's </s> is above this.
    uncovered_share: low_coverage when more than this share of the source words gets under COVERAGE_MASS.
    repeat_run: repetition when an n-gram follows itself at least this many times in a row.
    source_copy: copy when the output's chrF against the source itself is at least this.
    length_ratio: (low, high): length_ratio when output words / source words is outside them.
    stopped_at_limit: stopped_at_limit when the search's stopped-at-limit mark is this (a rule, not a measure).
    unknown_share: unknown_input when more than this share of the source's pieces is <unk> or bytes.
    combined: not a signal: the model's fitted combined score (aiayn.inspect.quality.combined), flagging a
    hallucination above its own threshold; None (the defaults, a file written before it existed): no score."""

    log_prob: float = -1.19
    source_contribution: float = 0.42
    eos_attention: float = 0.16
    uncovered_share: float = 0.25
    repeat_run: int = 3
    source_copy: float = 30.5
    length_ratio: tuple[float, float] = (0.64, 1.73)
    stopped_at_limit: bool = True
    unknown_share: float = UNKNOWN_SHARE
    combined: Combined | None = None


DEFAULT_THRESHOLDS = Thresholds()
SIGNAL_FIELDS = tuple(f.name for f in fields(Thresholds) if f.name != "combined")  # one per signal



def _field_value(path: Path, name: str, value, default):
    """A stored threshold, checked against its default's kind (a number, a [low, high] pair, a bool)."""
    if isinstance(default, tuple):
        ok = isinstance(value, list) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value)
        value = tuple(value) if ok else value
    else:
        ok = isinstance(value, bool) if isinstance(default, bool) else \
            isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        raise AiaynError(f"{path}: thresholds.{name} is {value!r}, not like {default!r}; run `aiayn calibrate "
                         f"--model {path.parent}` again, or delete the file to use the defaults")
    return value


def read_thresholds(model_dir: str | Path | None) -> Thresholds | None:
    """The thresholds stored in model_dir/thresholds.json, None where there is none (the defaults apply).
    Signals the file does not name keep their defaults."""
    if model_dir is None or not (Path(model_dir) / THRESHOLDS_FILE).is_file():
        return None
    path = Path(model_dir) / THRESHOLDS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        stored = data["thresholds"]
    except (ValueError, KeyError, TypeError):
        raise AiaynError(f"{path}: not a thresholds file (JSON with a \"thresholds\" object); run `aiayn "
                         f"calibrate --model {path.parent}` again, or delete it to use the defaults") from None
    if not isinstance(stored, dict):
        raise AiaynError(f"{path}: \"thresholds\" is not an object; run `aiayn calibrate --model {path.parent}` "
                         f"again, or delete it to use the defaults")
    known = {name: getattr(DEFAULT_THRESHOLDS, name) for name in SIGNAL_FIELDS}
    unknown = sorted(set(stored) - set(known))
    if unknown:
        raise AiaynError(f"{path}: unknown signal {unknown[0]!r} in \"thresholds\" (known: {', '.join(known)})")
    combined = combined_from_dict(str(path), data["combined"], SIGNAL_FIELDS) if "combined" in data else None
    return replace(DEFAULT_THRESHOLDS, combined=combined,
                   **{k: _field_value(path, k, v, known[k]) for k, v in stored.items()})


def model_thresholds(translator) -> Thresholds:
    """The thresholds a translator's diagnostics use: its model's stored ones, else the defaults."""
    return read_thresholds(getattr(translator, "model_dir", None)) or DEFAULT_THRESHOLDS

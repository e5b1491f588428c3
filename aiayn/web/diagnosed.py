"""Diagnostics over REST ("diagnostics": true in POST /api/translate; aiayn.inspect.quality.diagnostics): with the
maps, the page's answer gains "diagnostics" and a coded warning per signal that fired (the page words it,
as its other warnings); without maps, the plain answer gains "diagnostics"."""

from aiayn.inspect.quality.combined import PAGE_WORDS as COMBINED_WORDS
from aiayn.inspect.quality.diagnostics import diagnose_output, translate_diagnosed
from aiayn.inspect.quality.signals import SIGNALS

# the signals the page words (the others' flags its own warnings already tell: stopped_at_limit, mostly_unknown)
PAGE_WORDS = {s.name: s.page_words for s in SIGNALS if s.page_words is not None}


def with_diagnostics(translator, text: str, fields: dict) -> dict:
    """The page's answer fields with the diagnostics of its translation (or of its teacher-forced target)."""
    found = diagnose_output(translator, text, fields["translation"], stopped_at_limit=fields["stopped_at_limit"])
    return {**fields, "diagnostics": found, "warnings": fields["warnings"] + page_warnings(found)}


def page_warnings(diagnostics: dict) -> list[dict]:
    """A warning {"code": "diag_<signal>", "value", "threshold", "low", "high", "words"} for each signal that
    fired, and "diag_combined" where the model's combined score fired; "words": its English text, which the
    page fills in where its language has none of its own."""
    fired = [(name, s, PAGE_WORDS[name]) for name, s in diagnostics["signals"].items()
             if s["flagged"] and name in PAGE_WORDS]
    combined = diagnostics.get("combined")
    if combined is not None and combined["flagged"]:
        fired.append(("combined", combined, COMBINED_WORDS))
    return [_warning(name, signal, words) for name, signal, words in fired]


def _warning(name: str, signal: dict, words: str) -> dict:
    threshold = signal["threshold"]
    low, high = threshold if isinstance(threshold, list) else (threshold, threshold)
    return {"code": f"diag_{name}", "value": signal["value"], "threshold": threshold, "low": low, "high": high,
            "words": words}


def plain_diagnosed(translator, text: str, options, target_prefix: str):
    """A plain translation (its answer without maps) with its diagnostics: the Translation, searched with maps."""
    return translate_diagnosed(translator, [text], options, target_prefix=[target_prefix])[0]

"""Diagnostics over REST ("diagnostics": true in POST /api/translate; aiayn.inspect.quality.diagnostics): with the
maps, the page's answer gains "diagnostics" and a coded warning per signal that fired (the page words it,
as its other warnings); without maps, the plain answer gains "diagnostics"."""

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
    fired; "words": its English text, which the page fills in where its language has none of its own."""
    found = []
    for name, signal in diagnostics["signals"].items():
        if signal["flagged"] and name in PAGE_WORDS:
            threshold = signal["threshold"]
            low, high = threshold if isinstance(threshold, list) else (threshold, threshold)
            found.append({"code": f"diag_{name}", "value": signal["value"], "threshold": threshold, "low": low,
                          "high": high, "words": PAGE_WORDS[name]})
    return found


def plain_diagnosed(translator, text: str, options, target_prefix: str):
    """A plain translation (its answer without maps) with its diagnostics: the Translation, searched with maps."""
    return translate_diagnosed(translator, [text], options, target_prefix=[target_prefix])[0]

"""Warnings about an input and its translation, each a code and its numbers: the page words them in its
own language (aiayn/web/static/i18n.js), the command line in English (`in_words`).

- mostly_unknown: more than BYTE_SHARE of the source's pieces are <unk> or byte pieces: a script or
  language the model never saw (its output is then a guess, often a loop to the length limit);
- unk: some pieces are <unk> (characters the tokenizer cannot write);
- unknown_tag: a tag-like word (>>xx<<) that is not a piece of the model's vocabulary: the model was trained
  with no such tag (data.corpora's tags), so it steers nothing; the sentence is translated all the same;
- target_language: the text has more of the target language's common words than the source's;
- source_cut: the source was longer than the model's positions and only its beginning was translated;
- stopped_at_limit: the output reached its length limit without </s>.
"""

from aiayn.data.corpora import unknown_tags
from aiayn.inspect.quality.language import looks_like

BYTE_SHARE = 0.5  # a source more than half unknown or byte pieces gets the "mostly unknown" warning


def input_warnings(tokenizer, source_tokens: list[str], text: str, *, stopped: bool, cut: bool,
                   max_positions: int, langs=(None, None)) -> list[dict]:
    """source_tokens: the source's pieces as the model read them (with </s>); langs: the model's (source,
    target) languages where known."""
    unk = tokenizer.source_id_to_piece([tokenizer.unk_id])[0]
    pieces = [p for p in source_tokens if p not in ("</s>", "▁")]  # a lone word boundary carries no text
    unknown = sum(p == unk for p in pieces)
    byte = sum(p.startswith("<0x") and p.endswith(">") for p in pieces)
    found = []
    if pieces and (unknown + byte) / len(pieces) > BYTE_SHARE:
        found.append({"code": "mostly_unknown", "n": unknown + byte, "of": len(pieces)})
    elif unknown:
        found.append({"code": "unk", "n": unknown, "unk": unk})
    tags = unknown_tags(text, lambda tag: tokenizer.source_piece_to_id(tag) != tokenizer.unk_id)
    if tags:
        found.append({"code": "unknown_tag", "tags": tags})
    language = looks_like(text, *langs)
    if language:
        found.append({"code": "target_language", "lang": language})
    if cut:
        found.append({"code": "source_cut", "limit": max_positions})
    if stopped:
        found.append({"code": "stopped_at_limit"})
    return found


def in_words(warning: dict) -> str:
    """One warning as an English clause, for the command line."""
    code = warning["code"]
    if code == "mostly_unknown":
        return (f"{warning['n']} of its {warning['of']} pieces are unknown or byte pieces: the model has not seen "
                f"this script or language, and its output is a guess")
    if code == "unk":
        return f"{warning['n']} piece(s) the model cannot read ({warning['unk']})"
    if code == "unknown_tag":
        return (f"{', '.join(warning['tags'])}: not a tag of this model (it was trained with no such tag), so it "
                f"steers nothing")
    if code == "target_language":
        return f"it looks written in the model's target language ({warning['lang']}), not its source language"
    if code == "source_cut":
        return f"longer than the model's maximum source length ({warning['limit']} pieces); translated its beginning"
    return "the output stopped at its length limit without ending (</s>): it may be cut short or looping"

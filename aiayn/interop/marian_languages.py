"""The language pair of an imported Marian model, which the served LibreTranslate API (/languages,
/translate) needs: --src-lang/--tgt-lang when given, else what the transformers folder says (the tokenizer's
source_lang/target_lang in tokenizer_config.json, the same keys in config.json or generation_config.json),
else an OPUS-MT name such as Helsinki-NLP/opus-mt-de-en (the name given to import-hf, the folder's, or the
_name_or_path that save_pretrained wrote). A multilingual name (opus-mt-en-ROMANCE, opus-mt-mul-en) names
no pair and is not read as one."""

import re
from pathlib import Path

from aiayn.errors import AiaynError
from aiayn.interop.marian_vocab import read_json

KEYS = (("source_lang", "target_lang"), ("src_lang", "tgt_lang"))  # as the folder's JSON files spell them
FILES = ("tokenizer_config.json", "config.json", "generation_config.json")
OPUS_MT = re.compile(r"opus-mt-(?:tc-(?:big-|base-)?)?([a-z]{2,3})-([a-z]{2,3})")
CODE = re.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")  # "de", "pt_BR", "zh-Hant": what LibreTranslate lists
MULTILINGUAL = {"mul"}  # OPUS-MT's "many languages"


def given_pair(src_lang: str | None, tgt_lang: str | None) -> tuple[str, str] | None:
    """--src-lang and --tgt-lang: both or neither, each a language code."""
    if not src_lang and not tgt_lang:
        return None
    if not src_lang or not tgt_lang:
        raise AiaynError("--src-lang and --tgt-lang name the model's language pair together: give both "
                         "(e.g. --src-lang de --tgt-lang en) or neither")
    for option, code in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)):
        if not CODE.fullmatch(code):
            raise AiaynError(f"{option} {code!r} is not a language code; give one such as de, en or pt_BR")
    return src_lang, tgt_lang


def _from_files(path: Path) -> tuple[str, str] | None:
    for name in FILES:
        found = read_json(path / name, {})
        for src_key, tgt_key in KEYS:
            pair = found.get(src_key), found.get(tgt_key)
            if all(isinstance(code, str) and CODE.fullmatch(code) for code in pair):
                return pair
    return None


def _from_name(name: str) -> tuple[str, str] | None:
    match = OPUS_MT.search(name.rstrip("/").rsplit("/", 1)[-1])
    if match and MULTILINGUAL.isdisjoint(match.groups()):
        return match.groups()
    return None


def language_pair(path: Path, src: str, given: tuple[str, str] | None) -> tuple[str, str] | None:
    """(source, target) of the Marian folder `path` that import-hf read from `src`, or None when nothing
    names them."""
    if given:
        return given
    found = _from_files(path)
    if found:
        return found
    names = (src, path.name, str(read_json(path / "config.json", {}).get("_name_or_path", "")))
    return next((pair for pair in map(_from_name, names) if pair), None)


def recorded_pair(model_dir: Path) -> tuple[str, str] | None:
    """The languages an import's info.json records (None for an import that names none, or one made before
    import-hf recorded them)."""
    import json

    try:
        info = json.loads((model_dir / "info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pair = (info.get("src_lang"), info.get("tgt_lang")) if isinstance(info, dict) else (None, None)
    return pair if all(isinstance(code, str) and code for code in pair) else None

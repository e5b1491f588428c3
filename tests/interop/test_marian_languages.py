"""Where import-hf finds a Marian model's language pair: the options first, then the folder's JSON files,
then an OPUS-MT name; a multilingual name or a malformed code names none."""

import json

import pytest

from aiayn.errors import AiaynError
from aiayn.interop.marian_languages import given_pair, language_pair


def _folder(tmp_path, name="model", **files):
    folder = tmp_path / name
    folder.mkdir()
    for file, content in files.items():
        (folder / f"{file}.json").write_text(json.dumps(content), encoding="utf-8")
    return folder


@pytest.mark.parametrize("files, src, pair", [
    (dict(tokenizer_config={"source_lang": "de", "target_lang": "en"}), "x", ("de", "en")),
    (dict(config={"src_lang": "fr", "tgt_lang": "en"}), "x", ("fr", "en")),
    (dict(tokenizer_config={"source_lang": None, "target_lang": None}), "Helsinki-NLP/opus-mt-de-en", ("de", "en")),
    (dict(config={"_name_or_path": "Helsinki-NLP/opus-mt-tc-big-en-fr"}), "x", ("en", "fr")),
    (dict(config={"_name_or_path": "Helsinki-NLP/opus-mt-en-ROMANCE"}), "x", None),
    (dict(config={"_name_or_path": "Helsinki-NLP/opus-mt-mul-en"}), "x", None),
    (dict(tokenizer_config={"source_lang": "de", "target_lang": "<en>"}), "x", None),
    ({}, "x", None),
])
def test_the_folder_names_the_pair_or_nothing(tmp_path, files, src, pair):
    assert language_pair(_folder(tmp_path, **files), src, None) == pair


def test_the_options_win_over_the_folder(tmp_path):
    folder = _folder(tmp_path, "opus-mt-de-en", tokenizer_config={"source_lang": "de", "target_lang": "en"})
    assert language_pair(folder, str(folder), given_pair("nl", "en")) == ("nl", "en")
    assert language_pair(_folder(tmp_path, "opus-mt-nl-en"), "x", None) == ("nl", "en")


@pytest.mark.parametrize("src_lang, tgt_lang", [("de", None), (None, "en"), ("de", "en glish")])
def test_bad_options_are_one_line(src_lang, tgt_lang):
    with pytest.raises(AiaynError) as err:
        given_pair(src_lang, tgt_lang)
    assert "\n" not in str(err.value) and "--" in str(err.value)

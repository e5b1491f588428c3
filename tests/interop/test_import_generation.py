"""An imported Marian model decodes as generate() does with the checkpoint's own generation config: small
random MarianMTModels saved by transformers with generation settings (num_beams absent or 3,
no_repeat_ngram_size, min_length, a float16 save), imported with `aiayn import-hf`, translated with the
model's own settings and compared with generate() called with no arguments beyond the batch. Settings
aiayn cannot apply are named in one warning at import."""

import logging
import warnings

import pytest
import torch

from aiayn.cli import main
from aiayn.config import DecodeConfig
from aiayn.decoding.translator import Translator
from aiayn.interop.marian_generation import apply_generation
from tests.interop.test_interop_marian import MULTI30K, _hf_model, _lines, _strip, spm_dir  # noqa: F401

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.skipif(MULTI30K is None, reason="no local Multi30k copy (set AIAYN_MULTI30K_DIR)"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

CASES = {  # name -> (generation settings, the precision the weights are saved in)
    "num-beams-absent": ({}, None),
    "beam-3": ({"num_beams": 3}, None),
    "beam-3-no-repeat-2": ({"num_beams": 3, "no_repeat_ngram_size": 2, "min_length": 6}, None),
    "greedy-no-repeat-2": ({"no_repeat_ngram_size": 2}, None),
    "float16": ({"num_beams": 3}, torch.float16),
    "bfloat16": ({}, torch.bfloat16),
}


def _save(spm_dir, out, settings: dict, dtype):  # noqa: F811
    """A Marian directory whose generation_config.json bans <pad> as OPUS-MT's do and sets `settings`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _hf_model(spm_dir, out)
        model = transformers.MarianMTModel.from_pretrained(out)
        generation = model.generation_config
        generation.bad_words_ids = [[model.config.pad_token_id]]
        for key, value in settings.items():
            setattr(generation, key, value)
        (model.to(dtype) if dtype else model).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def dirs(spm_dir, tmp_path_factory):  # noqa: F811
    """name -> (save_pretrained directory, aiayn import of it)."""
    root = tmp_path_factory.mktemp("generation")
    out = {}
    for name, (settings, dtype) in CASES.items():
        src = _save(spm_dir, root / name, settings, dtype)
        assert main(["import-hf", str(src), "--out", str(root / f"{name}-aiayn")]) == 0
        out[name] = (src, root / f"{name}-aiayn")
    return out


@pytest.mark.parametrize("name", list(CASES))
@torch.no_grad()
def test_translations_equal_generate_with_the_checkpoints_own_settings(dirs, name):
    src, imported = dirs[name]
    settings, dtype = CASES[name]
    # float16, bfloat16: generate() on the saved weights cast to float32, as the import casts them
    hf_model = transformers.MarianMTModel.from_pretrained(src, dtype=torch.float32).eval()
    tok = transformers.MarianTokenizer.from_pretrained(src)
    assert hf_model.generation_config.num_beams == settings.get("num_beams")  # None: transformers uses 1
    translator = Translator.from_pretrained(imported)
    cfg = translator.decode_cfg
    assert cfg.beam == settings.get("num_beams", 1) and (cfg.max_len_a, cfg.max_len_b) == (0.0, 23)
    assert cfg.no_repeat_ngram_size == settings.get("no_repeat_ngram_size", 0)
    assert cfg.min_length == max(settings.get("min_length", 0) - 1, 0)  # generate() counts the start token
    sentences = _lines("de", "val", 8)
    out = hf_model.generate(**tok(sentences, padding=True, return_tensors="pt"))
    expected = [_strip(row, tok) for row in out.tolist()]
    assert len({tuple(e) for e in expected}) > 3  # the outputs depend on the source
    results = translator.translate(sentences)
    for result, ids in zip(results, expected):
        assert result.tokens == tok.convert_ids_to_tokens(ids)
    if settings.get("no_repeat_ngram_size"):  # the setting matters: generate() without it outputs another
        plain = hf_model.generate(**tok(sentences, padding=True, return_tensors="pt"), no_repeat_ngram_size=0)
        assert [_strip(row, tok) for row in plain.tolist()] != expected
        assert [r.tokens for r in translator.translate(sentences, no_repeat_ngram_size=0)] == \
            [r.tokens for r in results]  # 0: the model's own
    if dtype:  # saved in low precision: its position tables are the sinusoids rounded to it
        assert str(dtype).replace("torch.", "") in (src / "config.json").read_text()


def test_unsupported_settings_are_named_in_one_warning(spm_dir, tmp_path, caplog):  # noqa: F811
    settings = {"repetition_penalty": 1.3, "forced_bos_token_id": 5, "forced_eos_token_id": 0,
                "bad_words_ids": [[58], [7, 8]], "num_beams": 2, "encoder_no_repeat_ngram_size": 3}
    src = _save(spm_dir, tmp_path / "hf", settings, None)
    with caplog.at_level(logging.WARNING, logger="aiayn.interop.marian_generation"):
        assert main(["import-hf", str(src), "--out", str(tmp_path / "out")]) == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "aiayn.interop.marian_generation"]
    assert len(lines) == 1
    for name in ("repetition_penalty=1.3", "forced_bos_token_id=5", "forced_eos_token_id=0", "bad_words_ids",
                 "encoder_no_repeat_ngram_size=3"):
        assert name in lines[0], name
    assert "num_beams" not in lines[0] and Translator.from_pretrained(tmp_path / "out").decode_cfg.beam == 2


@pytest.mark.parametrize("settings, expected", [
    ({}, dict(beam=1, length_penalty=1.0, max_len_a=0.0, max_len_b=19, min_length=0, no_repeat_ngram_size=0)),
    ({"max_new_tokens": 40, "max_length": 512, "min_length": 3, "min_new_tokens": 4, "num_beams": 6,
      "length_penalty": 0.8, "early_stopping": True, "no_repeat_ngram_size": 3},
     dict(beam=6, length_penalty=0.8, max_len_b=40, min_length=4, no_repeat_ngram_size=3, early_stopping=True)),
    ({"max_length": 512, "min_length": 9}, dict(max_len_b=511, min_length=8)),
])
def test_generation_settings_become_decode_settings(settings, expected):
    decode = DecodeConfig()
    named = apply_generation(decode, transformers.GenerationConfig(**settings), pad_id=3, where="x")
    assert named == [] and decode.length_penalty_form == "hf"
    for field, value in expected.items():
        assert getattr(decode, field) == value, field


def test_early_stopping_never_and_sampling_are_named():
    named = apply_generation(DecodeConfig(), transformers.GenerationConfig(early_stopping="never", do_sample=True,
                                                                            top_k=5), pad_id=3, where="x")
    assert [n.split("=")[0] for n in named] == ["early_stopping", "do_sample", "top_k"]

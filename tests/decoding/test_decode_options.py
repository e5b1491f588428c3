"""DecodeOptions: one validator for every entry point (API, CLI, REST), checks against the model."""

import inspect
from dataclasses import FrozenInstanceError

import pytest
from fastapi.testclient import TestClient

from aiayn.decoding.ct2_engine import CT2Engine
from aiayn.decoding.options import DecodeOptions
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.web.app import create_app
from tests.cli_helpers import run_cli


@pytest.fixture(scope="module")
def translator(transformer_dir):
    return Translator.from_pretrained(transformer_dir)


def test_translate_takes_one_positional_parameter():
    params = list(inspect.signature(Translator.translate).parameters.values())[1:]  # after self
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert [p.name for p in positional] == ["sentences"]
    with pytest.raises(FrozenInstanceError):
        DecodeOptions().beam = 3  # frozen: checked once, never changed after


@pytest.mark.parametrize("kwargs, needle", [
    (dict(beam=0), "beam=0 must be >= 1"),
    (dict(beam=2.5), "beam must be an integer"),
    (dict(beam=2, n_best=3), "n_best=3 must be at most the beam (2)"),
    (dict(alpha=-1), "alpha (length penalty) must be a number in [0, 10]"),
    (dict(length_penalty_form="wu"), "length_penalty_form must be one of gnmt, hf"),
    (dict(early_stopping="yes"), "early_stopping must be true or false"),
    (dict(min_length=-1), "min_length=-1 must be >= 0"),
    (dict(max_tokens=0), "max_tokens=0 must be >= 1"),
    (dict(batch_size=True), "batch_size must be an integer"),
    (dict(sampling=SamplingOptions(top_p=0)), "top_p must be a number in (0, 1]"),
    (dict(sampling=SamplingOptions(), beam=2, min_length=1), "drop beam, min_length"),
])
def test_every_option_is_checked_once_naming_it(kwargs, needle):
    with pytest.raises(AiaynError) as err:
        DecodeOptions(**kwargs)
    assert needle in str(err.value)


def test_an_unknown_override_is_named(translator):
    with pytest.raises(AiaynError, match="unknown decoding option bem"):
        translator.translate(["nine"], bem=3)


def test_the_models_settings_fill_what_is_not_given(translator):
    resolved = translator.resolve()
    cfg = translator.decode_cfg
    assert (resolved.beam, resolved.alpha, resolved.length_penalty_form) == (cfg.beam, cfg.length_penalty,
                                                                           cfg.length_penalty_form)
    assert resolved.max_output_len == translator.max_positions
    assert translator.resolve(beam=2, max_output_len=10).max_output_len == 10


def test_a_beam_larger_than_the_vocabulary_allows_is_one_line(translator, transformer_dir, tmp_path, capsys):
    vocab = translator.tokenizer.tgt_vocab_size  # 128: the first step has 128 candidates for 2 x beam places
    with pytest.raises(AiaynError, match=f"give a beam of at most {vocab // 2}"):
        translator.translate(["nine"], beam=1000)
    with pytest.raises(AiaynError, match="at most"):  # the ct2 engine's rules are the same function's
        DecodeOptions(beam=1000).for_model(translator.decode_cfg, vocab_size=vocab, max_positions=64,
                                          capabilities=CT2Engine.capabilities)
    assert translator.translate(["nine"], beam=vocab // 2)[0].tokens  # the largest beam allowed runs
    (tmp_path / "in.txt").write_text("nine\n", encoding="utf-8")
    code, out = run_cli(["translate", "--model", transformer_dir, "--input", tmp_path / "in.txt", "--beam", "1000"],
                        capsys)
    assert code == 2 and out.count("\n") == 1 and "at most 64" in out


def test_min_length_beyond_the_outputs_is_refused_and_within_them_is_kept(translator):
    with pytest.raises(AiaynError, match="min_length=40: outputs of this model are at most 30 tokens"):
        translator.translate(["nine"], min_length=40, max_output_len=30)
    # "nine" is 2 source tokens: its own limit is 1 x 2 + 50 = 52; a min_length of 60 raises it
    assert len(translator.translate(["nine"], beam=2, min_length=60)[0].tokens) >= 60


def test_a_prefix_the_model_cannot_write_is_refused_naming_its_characters(translator, transformer_dir, tmp_path,
                                                                          capsys):
    with pytest.raises(AiaynError, match="target prefix 2: the model cannot write ż 日"):
        translator.translate(["nine", "ten"], target_prefix=["", "neun ż 日 ż"])
    assert translator.translate(["nine"], target_prefix=["zwei"])[0].text.startswith("zwei")
    (tmp_path / "in.txt").write_text("nine\n", encoding="utf-8")
    (tmp_path / "prefix.txt").write_text("ż\n", encoding="utf-8")
    code, out = run_cli(["translate", "--model", transformer_dir, "--input", tmp_path / "in.txt", "--target-prefix",
                         tmp_path / "prefix.txt"], capsys)
    assert code == 2 and "cannot write ż" in out
    client = TestClient(create_app(translator))
    for payload in ({"text": "nine", "target_prefix": "ż"},
                    {"text": "nine", "target_prefix": "ż", "attention": False}):
        answer = client.post("/api/translate", json=payload)
        assert answer.status_code == 400 and "cannot write ż" in answer.json()["error"]


def test_the_web_starts_from_the_models_beam(translator):
    """No beam in a request: the model's decode.beam, as `aiayn translate` (the page and the CLI agree)."""
    client = TestClient(create_app(translator))
    answer = client.post("/api/translate", json={"text": "nine ten", "attention": False}).json()
    assert answer["translation"] == translator.translate(["nine ten"])[0].text


def test_check_engine_refuses_what_the_engine_cannot_do_before_any_model():
    """DecodeOptions.check_engine needs no model (the command line calls it before loading one): CTranslate2
    neither samples, nor returns maps, nor searches past K finished hypotheses; the native engine does all."""
    from aiayn.decoding.engines import NativeEngine

    for options, words in ((DecodeOptions(sampling=SamplingOptions()), "sampling"),
                           (DecodeOptions(return_attention=True), "attention maps"),
                           (DecodeOptions(early_stopping=False), "early_stopping false")):
        with pytest.raises(AiaynError, match=words):
            options.check_engine(CT2Engine.capabilities)
        options.check_engine(NativeEngine.capabilities)

"""The drift check at load (aiayn.decoding.drift): a model whose int8 outputs drift from float32's gets one
warning line saying what to do; a normal model, bfloat16 on the same drifting model, and float32 get none."""

import logging

import pytest
import torch

from aiayn.checkpoint import load_checkpoint, save_checkpoint
from aiayn.cpu import supported_compute_types
from aiayn.decoding.drift import PROBE_LEN, PROBES, measure_drift, probe_sources, warn_if_drifting
from aiayn.decoding.translator import Translator
from aiayn.model.feed_forward import PositionwiseFeedForward

needs_int8 = pytest.mark.skipif("int8" not in supported_compute_types(), reason="no native int8 here")
needs_bfloat16 = pytest.mark.skipif("bfloat16" not in supported_compute_types(), reason="no native bfloat16 here")
SENTENCES = ["forty five", "three hundred twenty one", "nine", "seven hundred", "twelve", "eighty eight"]


@pytest.fixture(scope="module")
def drifting_dir(transformer_dir, tmp_path_factory):
    """The tests' tiny Transformer with outlier features: in every FFN, the first 4 hidden units' w_1 rows
    (and biases) / 1000 and their w_2 columns x 1000. ReLU is positively homogeneous, so float32 computes the
    same function; int8's one scale per output channel of w_2 is then set by those columns, and the other
    weights round to 0 (measured: agreement 92%, max difference 1.85; bfloat16 100%, 0.017)."""
    model, cfg, tokenizer = load_checkpoint(transformer_dir, torch.device("cpu"))
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, PositionwiseFeedForward):
                module.w_1.weight[:4] /= 1000
                module.w_1.bias[:4] /= 1000
                module.w_2.weight[:, :4] *= 1000
    return save_checkpoint(tmp_path_factory.mktemp("drifting") / "model", model, cfg, tokenizer)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aiayn.decoding.drift" and r.levelno >= logging.WARNING]


def test_probes_are_the_first_ordinary_pieces_in_a_fixed_order(tokenizer):
    probes = probe_sources(tokenizer)
    assert probes == probe_sources(tokenizer) and len(probes) == PROBES
    specials = {tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id}
    for probe in probes:
        assert len(probe) == PROBE_LEN + 1 and probe[-1] == tokenizer.eos_id
        assert not specials & set(probe[:-1])
    used = sorted({i for probe in probes for i in probe[:-1]})
    assert len(used) == PROBES * PROBE_LEN  # 48 different pieces: the vocabulary (128) has that many
    assert used[-1] < PROBES * PROBE_LEN + len(specials) + 8  # the first ones (a few <...> pieces skipped)


@needs_int8
def test_a_drifting_model_warns_in_int8_once_with_what_to_do(drifting_dir, caplog):
    with caplog.at_level(logging.WARNING):
        translator = Translator.from_pretrained(drifting_dir, compute_type="int8")
    (message,) = _warnings(caplog)
    assert "int8" in message and "%" in message and "--compute-type float32 or bfloat16" in message
    assert "\n" not in message
    drift = measure_drift(translator.model, translator.tokenizer)
    assert drift.drifts and drift.max_difference > 1.0  # measured 1.85


def test_the_drifting_model_is_the_same_model_in_float32(drifting_dir, transformer_dir, caplog):
    """The rescaling changed nothing for float32 (so the warning above is int8's alone), and float32 is not
    checked at all."""
    with caplog.at_level(logging.WARNING):
        rescaled = Translator.from_pretrained(drifting_dir)
    plain = Translator.from_pretrained(transformer_dir)
    assert [r.text for r in rescaled.translate(SENTENCES)] == [r.text for r in plain.translate(SENTENCES)]
    assert warn_if_drifting(rescaled.model, rescaled.tokenizer) is None and not _warnings(caplog)


@needs_bfloat16
def test_bfloat16_keeps_the_drifting_model(drifting_dir, caplog):
    with caplog.at_level(logging.WARNING):
        translator = Translator.from_pretrained(drifting_dir, compute_type="bfloat16")
    assert not _warnings(caplog)
    drift = measure_drift(translator.model, translator.tokenizer)
    assert drift.agreement == 1.0 and drift.max_difference < 0.05  # measured 0.017


@pytest.mark.parametrize("compute_type", [pytest.param("int8", marks=needs_int8),
                                          pytest.param("bfloat16", marks=needs_bfloat16)])
def test_a_normal_model_does_not_warn(transformer_dir, compute_type, caplog):
    with caplog.at_level(logging.WARNING):
        translator = Translator.from_pretrained(transformer_dir, compute_type=compute_type)
    assert not _warnings(caplog)
    drift = measure_drift(translator.model, translator.tokenizer)
    # measured: agreement 100%, max difference bfloat16 0.015, int8 0.027, over 52 positions
    assert drift.agreement == 1.0 and drift.max_difference < 0.1 and drift.positions > PROBES * 2


@needs_int8
def test_an_ensemble_is_checked_too(drifting_dir, transformer_dir, caplog):
    with caplog.at_level(logging.WARNING):
        Translator.from_pretrained([drifting_dir, drifting_dir], compute_type="int8")
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        Translator.from_pretrained([transformer_dir, transformer_dir], compute_type="int8")
    assert not _warnings(caplog)

"""The source_contribution signal: each output step's share from the source by ALTI+ (aiayn.inspect.contributions),
averaged; the searched output and the same output teacher-forced agree; a decoder that cannot read the source
gets nothing from it and is flagged; a model without layers of heads leaves the signal out."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from aiayn.decoding.translator import Translator
from aiayn.inspect.contributions import measure_contributions
from aiayn.inspect.quality.diagnostics import diagnose, forced_evidence, source_shares, translate_diagnosed
from aiayn.inspect.quality.thresholds import Thresholds
from tests.inspect.quality.test_diagnostics import clean
from tests.model_helpers import BOS, random_batch, small_model


def test_the_signal_is_the_mean_share_and_fires_when_low():
    shares = np.array([0.7, 0.6, 0.5, 0.4])  # three tokens and </s>
    found = diagnose(clean(source_shares=shares), Thresholds(source_contribution=0.3))
    assert found["signals"]["source_contribution"]["value"] == pytest.approx(0.55)
    assert found["flags"] == []
    assert found["source_contribution"] == pytest.approx(0.55)
    assert found["token_source_contribution"] == [0.7, 0.6, 0.5]  # one per output token, </s> left out
    low = diagnose(clean(source_shares=shares * 0.2), Thresholds(source_contribution=0.3))
    assert low["signals"]["source_contribution"]["flagged"] and low["flags"] == ["hallucination"]
    unmeasured = diagnose(clean(source_shares=None))  # not measured: left out, not 0
    assert "source_contribution" not in unmeasured["signals"] and "token_source_contribution" not in unmeasured


def test_shares_are_the_rollouts_source_columns_of_the_forced_output():
    model = small_model(n_encoder_layers=2, n_decoder_layers=2, d_model=32, n_heads=4)
    src, tgt_in = random_batch(batch=1, src_len=6, tgt_len=5)
    shares = source_shares(model, src[0].tolist(), tgt_in[0, 1:].tolist(), BOS)
    rollout = measure_contributions(model, src, tgt_in).decoder_rollout[0]  # (T, S + T)
    np.testing.assert_allclose(shares, rollout[:, : src.size(1)].sum(-1).numpy(), atol=1e-6)
    assert shares.shape == (5,) and np.all((shares > 0) & (shares < 1))


def test_a_decoder_that_cannot_read_the_source_gets_nothing_from_it():
    model = small_model(n_encoder_layers=2, n_decoder_layers=2, d_model=32, n_heads=4)
    with torch.no_grad():
        for layer in model.decoder_layers:
            layer.cross_attn.out_proj.weight.zero_()  # every head's f_h(x_j) = 0: nothing moves from the source
    src, tgt_in = random_batch(batch=1, src_len=6, tgt_len=5)
    shares = source_shares(model, src[0].tolist(), tgt_in[0, 1:].tolist(), BOS)
    np.testing.assert_allclose(shares, 0.0, atol=1e-6)


def test_a_searched_output_is_measured_on_its_own_pieces(transformer_dir):
    translator = Translator.from_pretrained(transformer_dir)
    tok = translator.tokenizer
    result = translate_diagnosed(translator, ["forty five"], beam=2)[0]
    shares = source_shares(translator.model, [tok.source_piece_to_id(p) for p in result.src_tokens],
                           [tok.piece_to_id(p) for p in result.tokens], tok.bos_id)
    assert len(shares) == len(result.tokens) + 1  # each token, then </s>
    searched = result.diagnostics["signals"]["source_contribution"]["value"]
    assert searched == pytest.approx(float(np.mean(shares)), abs=1e-4)


def test_a_model_without_layers_of_heads_leaves_the_signal_out(rnn_dir):
    translator = Translator.from_pretrained(rnn_dir)
    evidence = forced_evidence(translator, "forty five", "fünf und vierzig")
    assert evidence.source_shares is None
    found = diagnose(replace(evidence))
    assert "source_contribution" not in found["signals"] and "log_prob" in found["signals"]

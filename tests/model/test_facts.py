"""What a model says it has (multi_head, attention kinds and shapes, layers, heads, d_ff, positions) is
what it has: the maps it returns, its modules; and its config says the same before the model is built."""

import subprocess
import sys

import pytest
import torch

from aiayn.errors import AiaynError
from aiayn.model import ModelConfig
from aiayn.model.build import FieldError
from tests.model_helpers import random_batch, small_model

CASES = [("tiny", {}), ("tiny", {"positional": "learned", "max_len": 40}), ("rnn-luong", {}), ("rnn-bahdanau", {})]


@pytest.mark.parametrize(("preset", "overrides"), CASES)
def test_the_facts_are_the_maps_the_model_returns(preset, overrides):
    model = small_model(preset, **overrides)
    src, tgt_in = random_batch()
    with torch.no_grad():
        _, maps = model(src, tgt_in, return_attention=True)
    assert set(model.attention_kinds) == set(maps)
    for kind in model.attention_kinds:
        assert model.attention_shape(kind) == tuple(maps[kind].shape[1:3])  # (B, L, H, Q, K)
        assert model.config.attention_shape(kind) == model.attention_shape(kind)
    assert model.config.multi_head == model.multi_head
    assert model.config.max_positions == model.max_positions


def test_a_transformer_says_its_sizes_and_positions():
    model = small_model("tiny", positional="learned", max_len=40)
    cfg = model.config
    assert model.multi_head and model.n_heads == cfg.n_heads and model.d_ff == cfg.d_ff
    assert (model.n_encoder_layers, model.n_decoder_layers) == (cfg.n_encoder_layers, cfg.n_decoder_layers)
    assert model.encoder_layers[0].ffn.w_1.weight.shape[0] == model.d_ff
    assert model.positional_kind == "learned" and model.max_positions == model.positional.table.size(0) == 40


def test_an_rnn_has_one_attention_no_positions_and_no_feed_forward():
    model = small_model("rnn-luong", n_encoder_layers=2)
    assert not model.multi_head and model.attention_kinds == ("cross",) and model.n_heads == 1
    assert model.positional_kind is None and model.max_positions is None and model.d_ff is None
    assert (model.n_encoder_layers, model.n_decoder_layers, model.d_model) == (2, 1, model.config.d_model)


def test_a_bad_field_is_a_user_mistake():
    with pytest.raises(AiaynError, match="model.dropout"):
        ModelConfig(dropout=1.5).validate()
    assert issubclass(FieldError, AiaynError)


def test_translator_is_importable_from_the_package_without_loading_torch_first():
    code = ("import sys, aiayn; assert 'torch' not in sys.modules; from aiayn import Translator; "
            "from aiayn.decoding.translator import Translator as T; assert Translator is T")
    subprocess.run([sys.executable, "-c", code], check=True)

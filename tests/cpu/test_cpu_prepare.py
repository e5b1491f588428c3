"""prepare_for_cpu: the same model, the same outputs, the same checkpoints, only faster pieces in it."""

import copy

import pytest
import torch
from torch import nn

from aiayn.cpu import prepare_for_cpu
from aiayn.cpu.dropout import FastDropout, keep_mask
from aiayn.cpu.linear import PackedInProjection, PackedLinear
from aiayn.cpu.output_projection import PackedOutputProjection
from aiayn.decoding.beam import SearchParams, beam_search
from aiayn.decoding.greedy import greedy_decode
from aiayn.model.attention import InProjection
from aiayn.training.loss import TrainingObjective
from tests.model_helpers import BOS, PAD, random_batch, small_model

EOS = 2


def prepared_copy(model):
    return prepare_for_cpu(copy.deepcopy(model))


def test_the_plain_model_holds_no_fast_module():
    fast = (PackedLinear, FastDropout)
    assert not any(isinstance(m, fast) for m in small_model().modules())


def test_prepare_swaps_the_pieces_and_keeps_parameters_checkpoints_and_rng():
    model = small_model(dropout=0.1)
    before = {name: p for name, p in model.named_parameters()}
    state = model.state_dict()
    rng = torch.get_rng_state()
    assert prepare_for_cpu(model) is model
    assert torch.equal(torch.get_rng_state(), rng)  # no init draws: training's stream is unchanged
    layer = model.decoder_layers[0]
    assert type(layer.self_attn.in_proj) is PackedInProjection and type(layer.cross_attn.out_proj) is PackedLinear
    assert type(layer.ffn.w_1) is PackedLinear and type(layer.residual_dropout) is FastDropout
    assert type(model.generator) is PackedOutputProjection and type(model.embed_dropout) is FastDropout
    assert layer.residual_dropout.p == model.embed_dropout.p == 0.1
    assert dict(model.named_parameters()) == before  # the very Parameter objects
    assert model.generator.weight is model.tgt_embed.weight  # tied stays tied
    assert list(model.state_dict()) == list(state)
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    modules = list(model.modules())
    prepare_for_cpu(model)  # twice: nothing changes
    assert list(model.modules()) == modules and all(a is b for a, b in zip(model.modules(), modules))


def test_prepare_leaves_the_rnn_as_it_is():
    model = small_model("rnn-luong")
    modules = list(model.modules())
    prepare_for_cpu(model)
    assert all(a is b for a, b in zip(model.modules(), modules)) and len(list(model.modules())) == len(modules)


def test_packed_in_projection_blocks_equal_the_plain_ones():
    torch.manual_seed(0)
    plain = InProjection(16, 48)
    fast = PackedInProjection.of(plain).eval()
    x = torch.randn(300, 16)  # rows x outputs past PACK_MIN_OUTPUTS: the packed product where oneDNN is
    with torch.no_grad():
        for first, last in ((0, 1), (1, 2), (2, 3), (1, 3), (0, 3)):
            torch.testing.assert_close(fast.blocks(x, first, last), plain.blocks(x, first, last))
        torch.testing.assert_close(fast(x), plain(x))


@pytest.mark.parametrize("rows", [1, 4, 300])
def test_packed_output_projection_equals_the_plain_one_with_and_without_autograd(rows):
    torch.manual_seed(0)
    plain = nn.Linear(16, 50)
    fast = PackedOutputProjection.of(plain)
    x = torch.randn(rows, 3, 16)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), plain(x))
    fast(x).sum().backward()  # autograd on: torch's linear, the gradient reaches the shared weight
    assert plain.weight.grad is not None


@pytest.mark.parametrize("batch", [3, 64])  # 64 sentences x beam 4: every product of a step packed
def test_decoding_outputs_are_the_same_with_and_without_prepare(batch):
    model = small_model()
    fast = prepared_copy(model)
    src, _ = random_batch(batch=batch)
    params = SearchParams(bos_id=BOS, eos_id=EOS, pad_id=PAD, beam=4, max_len_b=8)
    with torch.no_grad():
        plain_beams, fast_beams = beam_search(model, src, params), beam_search(fast, src, params)
        plain_greedy, fast_greedy = (greedy_decode(m, src, BOS, EOS, PAD, max_len_b=8) for m in (model, fast))
    assert [[h.tokens for h in b] for b in fast_beams] == [[h.tokens for h in b] for b in plain_beams]
    for plain_b, fast_b in zip(plain_beams, fast_beams):
        assert [h.log_prob for h in fast_b] == pytest.approx([h.log_prob for h in plain_b], abs=1e-4)
    assert fast_greedy[0] == plain_greedy[0]
    torch.testing.assert_close(fast_greedy[1], plain_greedy[1], atol=1e-4, rtol=1e-5)
    with torch.no_grad():  # teacher forcing (scoring) through the prepared output projection
        src, tgt = random_batch(batch=batch)
        torch.testing.assert_close(fast(src, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)


def training_step(model, seed):
    """One training step's loss and gradients, dropout drawn from `seed`."""
    objective = TrainingObjective(model=model.train(), pad_id=PAD, epsilon=0.1)
    src, tgt = random_batch(batch=8, tgt_len=7)
    torch.manual_seed(seed)
    loss, _ = objective(src, tgt[:, :-1], tgt[:, 1:])
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


def test_a_training_step_without_dropout_is_bit_identical():
    """Training products run with autograd on: torch's own, prepared or not."""
    model = small_model(dropout=0.0)
    loss, grads = training_step(model, seed=0)
    fast_loss, fast_grads = training_step(prepared_copy(model), seed=0)
    assert torch.equal(fast_loss, loss)
    assert all(torch.equal(fast_grads[name], g) for name, g in grads.items())


def test_a_training_step_with_dropout_draws_the_fast_masks():
    """With P_drop > 0 the prepared model's residual dropout draws keep_mask's masks from the seed (the
    masks the trainer's runs and their exact resumes are made of): the same seed, the same loss."""
    model = prepared_copy(small_model(dropout=0.3))
    first, _ = training_step(copy.deepcopy(model), seed=1)
    again, _ = training_step(copy.deepcopy(model), seed=1)
    other, _ = training_step(copy.deepcopy(model), seed=2)
    assert torch.equal(first, again) and not torch.equal(first, other)
    x = torch.randn(5, 7, 16)
    torch.manual_seed(3)
    dropped = model.train().embed_dropout(x)
    torch.manual_seed(3)
    torch.testing.assert_close(dropped, x * keep_mask(x.shape, 0.3, x.device) / 0.7)

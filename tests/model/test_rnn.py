import pytest
import torch

from aiayn.model.build import CHOICES
from tests.model_helpers import PAD, random_batch, small_model, step_by_step_logprobs


@pytest.mark.parametrize("preset", ["rnn-luong", "rnn-bahdanau"])
@pytest.mark.parametrize("score", CHOICES["score"])
def test_step_by_step_equals_full_forward(preset, score):
    model = small_model(preset, score=score, d_model=16, n_decoder_layers=2, n_encoder_layers=2)
    src, tgt = random_batch()
    src[2, -3:] = PAD
    with torch.no_grad():
        full, maps = model(src, tgt, return_attention=True)
        steps, step_maps = step_by_step_logprobs(model, src, tgt, return_attention=True)
    torch.testing.assert_close(steps, torch.log_softmax(full, -1), atol=1e-5, rtol=1e-5)
    cross = maps["cross"]  # (B, 1, 1, T, S)
    torch.testing.assert_close(torch.cat([m["cross"] for m in step_maps], 3), cross)
    torch.testing.assert_close(cross.sum(-1), torch.ones(cross.shape[:-1]))
    assert torch.all(cross[2, ..., -3:] == 0)


@pytest.mark.parametrize("preset", ["rnn-luong", "rnn-bahdanau"])
def test_rnn_padding_invariance_and_reorder(preset):
    model = small_model(preset, d_model=16)
    src, tgt = random_batch(batch=3)
    padded = torch.cat([src, torch.full((3, 4), PAD)], 1)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=1e-5, rtol=1e-5)
        state = model.init_state(model.encode(src)[0], src)
        _, state, _ = model.decode_step(tgt[:, 0], state)
        order = torch.tensor([1, 1, 0])
        a, _, _ = model.decode_step(tgt[order, 1], state.select(order, order))
        b, _, _ = model.decode_step(tgt[:, 1], state)
    torch.testing.assert_close(a, b[order])


def test_rnn_learns_gradients_flow():
    model = small_model("rnn-bahdanau", d_model=16).train()
    src, tgt = random_batch()
    model(src, tgt).sum().backward()
    assert model.decoder.score.W_1.weight.grad.abs().sum() > 0
    assert model.encoder.rnn.weight_hh_l0.grad.abs().sum() > 0

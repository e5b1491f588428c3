"""Contributions are equivalences: the decomposition sums back to each sublayer's output as the model's own
forward computes it, value-norm maps equal a per-head computation written out here, and a head that puts
most of its weight on a token with a near-zero value vector gets a small contribution from it."""

import pytest
import torch
from torch import nn

from aiayn.inspect.contributions import measure_contributions
from aiayn.inspect.contributions.decompose import alti_contributions, decompose, value_norm_maps
from aiayn.inspect.contributions.trace import SublayerTrace, trace_sublayers
from aiayn.inspect.maps.checks import InspectError
from aiayn.model.attention import MultiHeadAttention
from tests.model_helpers import PAD, random_batch, small_model

F = nn.functional


def _batch():
    src, tgt_in = random_batch(batch=2, src_len=7, tgt_len=6)
    src[1, -2:] = PAD  # a padded source: its keys get no weight and no contribution
    return src, tgt_in


def _layer_inputs(model, src, tgt_in):
    """Each layer's input stream from the model's own forward, by forward pre-hooks: (encoder, decoder)."""
    seen = {"enc": [], "dec": []}
    hooks = [layer.register_forward_pre_hook(lambda _m, args, name=name: seen[name].append(args[0]))
             for name, layers in (("enc", model.encoder_layers), ("dec", model.decoder_layers)) for layer in layers]
    with torch.no_grad():
        model(src, tgt_in)
    for hook in hooks:
        hook.remove()
    return seen["enc"], seen["dec"]


def _torch_sublayer(attn, norm, norm_first, x, values, key_padding_mask=None, causal=False):
    """The sublayer by torch's own multi-head attention with the same weights: (B, Q, D)."""
    h = F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps) if norm_first else x
    if values is None:
        values = h
    mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).triu(1) if causal else None  # True = masked
    out, _ = F.multi_head_attention_forward(
        h.transpose(0, 1), values.transpose(0, 1), values.transpose(0, 1), attn.d_model, attn.n_heads,
        attn.in_proj.weight, attn.in_proj.bias, None, None, False, 0.0, attn.out_proj.weight, attn.out_proj.bias,
        training=False, key_padding_mask=key_padding_mask, need_weights=False, attn_mask=mask)
    z = x + out.transpose(0, 1)
    return z if norm_first else F.layer_norm(z, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def _expected_outputs(model, src, tgt_in):
    enc_in, dec_in = _layer_inputs(model, src, tgt_in)
    with torch.no_grad():
        memory, _ = model.encode(src)
        expected = [_torch_sublayer(layer.self_attn, layer.self_attn_norm, model.norm_first, x, None,
                                    key_padding_mask=src == PAD) for layer, x in zip(model.encoder_layers, enc_in)]
        for layer, y in zip(model.decoder_layers, dec_in):
            after_self = _torch_sublayer(layer.self_attn, layer.self_attn_norm, model.norm_first, y, None,
                                         causal=True)
            after_cross = _torch_sublayer(layer.cross_attn, layer.cross_attn_norm, model.norm_first, after_self,
                                          memory, key_padding_mask=src == PAD)
            expected += [after_self, after_cross]
    return expected


@pytest.mark.parametrize("norm_first", [False, True])
def test_decomposition_sums_to_the_models_sublayer_output(norm_first):
    model = small_model(norm_first=norm_first)
    src, tgt_in = _batch()
    traces = trace_sublayers(model, src, tgt_in)
    expected = _expected_outputs(model, src, tgt_in)
    assert [t.kind for t in traces] == ["encoder_self"] * 2 + ["decoder_self", "cross"] * 2
    _, maps = model(src, tgt_in, return_attention=True)
    for trace, want in zip(traces, expected):
        torch.testing.assert_close(trace.output, want, atol=1e-5, rtol=0)  # the traced run is the model's
        torch.testing.assert_close(trace.weights, maps[trace.kind][:, trace.layer])  # the captured maps
        parts = decompose(trace)
        total = parts.terms.sum(dim=2) + parts.residual + parts.bias  # sum_j T_i(x_j) + bias_i: (B, Q, D)
        torch.testing.assert_close(total, want, atol=1e-4, rtol=0)


def test_padded_source_keys_contribute_nothing():
    model = small_model()
    src, tgt_in = _batch()
    result = measure_contributions(model, src, tgt_in)
    assert result.alti["cross"][1, :, :, 5:7].abs().max() == 0  # (L, T, S + 1): source keys 5, 6 are padding
    assert result.value_norms["cross"][1, ..., 5:].abs().max() == 0
    assert result.encoder_rollout[1, :5, 5:].abs().max() == 0


def _direct_value_norms(trace):
    """||alpha^h_ij f_h(x_j)|| and ||sum_h alpha^h_ij f_h(x_j)||, one head, query and key at a time."""
    attn, d = trace.attn, trace.attn.d_head
    W_V, b_V = attn.in_proj.weight[2 * attn.d_model:], attn.in_proj.bias[2 * attn.d_model:]
    B, H, Q, K = trace.weights.shape
    per_head, summed = torch.zeros(B, H, Q, K), torch.zeros(B, Q, K)
    for b in range(B):
        for j in range(K):
            f = [(trace.values[b, j] @ W_V[h * d:(h + 1) * d].T + b_V[h * d:(h + 1) * d])
                 @ attn.out_proj.weight[:, h * d:(h + 1) * d].T for h in range(H)]  # f_h(x_j): (D,) per head
            for i in range(Q):
                moved = [trace.weights[b, h, i, j] * f[h] for h in range(H)]
                per_head[b, :, i, j] = torch.stack([m.norm() for m in moved])
                summed[b, i, j] = sum(moved).norm()
    return per_head, summed


def test_value_norm_maps_equal_a_direct_computation():
    model = small_model()
    src, tgt_in = _batch()
    with torch.no_grad():
        for trace in trace_sublayers(model, src, tgt_in):
            per_head, summed = value_norm_maps(trace)
            want_per_head, want_summed = _direct_value_norms(trace)
            torch.testing.assert_close(per_head, want_per_head, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(summed, want_summed, atol=1e-5, rtol=1e-5)


def _hand_made_trace():
    """One head, W^V = W^O = I and no biases, so f(x_j) = x_j. Query 2 puts 0.9 of its weight on token 0,
    whose vector is near zero (like a </s> or a full stop), and 0.1 on token 1."""
    attn = MultiHeadAttention(d_model=4, n_heads=1)
    norm = nn.LayerNorm(4)
    with torch.no_grad():
        attn.in_proj.weight[8:] = torch.eye(4)
        attn.in_proj.bias.zero_()
        attn.out_proj.weight.copy_(torch.eye(4))
        attn.out_proj.bias.zero_()
    x = torch.tensor([[[0.01, -0.01, 0.01, -0.01], [0.0, 2.0, -2.0, 1.0], [0.0, 1.0, -1.0, 1.0]]])  # (1, 3, 4)
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.9, 0.1, 0.0]])[None, None]  # (1, 1, 3, 3)
    z = x + weights[0] @ x  # x + MultiHead(x)
    output = F.layer_norm(z, (4,), norm.weight, norm.bias, norm.eps)
    return SublayerTrace("encoder_self", 0, x, x, weights, output, attn, norm, norm_first=False)


def test_weights_and_contributions_disagree_on_a_near_zero_value():
    trace = _hand_made_trace()
    with torch.no_grad():
        per_head, summed = value_norm_maps(trace)
        alti = alti_contributions(decompose(trace), self_attention=True)  # (1, 3, 3)
    row = per_head[0, 0, 2]
    torch.testing.assert_close(row, torch.tensor([0.9 * 0.02, 0.1 * 3.0, 0.0]))  # 0.9 ||x_0||, 0.1 ||x_1||
    torch.testing.assert_close(summed[0, 2], row)  # one head: the sum is that head
    assert trace.weights[0, 0, 2].argmax() == 0 and row.argmax() == 1  # the weights say token 0, norms token 1
    assert alti[0, 2, 1] > 10 * alti[0, 2, 0]  # ALTI+ agrees with the norms
    assert alti[0, 2, 0] < 0.01
    torch.testing.assert_close(alti.sum(-1), torch.ones(1, 3))


def test_source_share_is_zero_when_cross_attention_moves_nothing():
    model = small_model()
    src, tgt_in = _batch()
    with torch.no_grad():
        for layer in model.decoder_layers:  # W^V, b^V of cross-attention zeroed: f(memory_j) = 0
            layer.cross_attn.in_proj.weight[2 * model.d_model:] = 0
            layer.cross_attn.in_proj.bias[2 * model.d_model:] = 0
    result = measure_contributions(model, src, tgt_in)
    assert result.source_share.abs().max() < 1e-6
    torch.testing.assert_close(result.prefix_share, torch.ones_like(result.prefix_share))


@pytest.mark.parametrize("norm_first", [False, True])
def test_shares_and_rows_are_distributions(norm_first):
    model = small_model(norm_first=norm_first)
    src, tgt_in = _batch()
    result = measure_contributions(model, src, tgt_in)
    B, T, S, L, H = 2, 6, 7, 2, model.n_heads
    assert result.value_norms["cross"].shape == (B, L, H, T, S)
    assert result.value_norms_summed["decoder_self"].shape == (B, L, T, T)
    assert result.alti["cross"].shape == (B, L, T, S + 1)
    for kind, alti in result.alti.items():
        torch.testing.assert_close(alti.sum(-1), torch.ones(alti.shape[:-1]), msg=kind)
    torch.testing.assert_close(result.source_share + result.prefix_share, torch.ones(B, T))
    assert ((result.source_share > 0) & (result.source_share < 1)).all()
    upper = torch.ones(T, T, dtype=torch.bool).triu(1)  # no token gets a share of a later prefix token
    assert result.decoder_rollout[:, :, S:][:, upper].abs().max() == 0


def test_training_mode_is_refused():
    model = small_model().train()
    with pytest.raises(InspectError, match="eval"):
        measure_contributions(model, *_batch())

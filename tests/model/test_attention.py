import math

import pytest
import torch
from torch import nn

from aiayn.model import MultiHeadAttention, causal_mask, padding_mask, scaled_dot_product_attention


def hand_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, -1) @ v


@pytest.mark.parametrize("use_mask", [None, "padding", "causal"])
def test_sdpa_equals_formula_and_torch(use_mask):
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    mask = None
    if use_mask == "padding":
        mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]), 0)
    elif use_mask == "causal":
        k, v = k[:, :, :5], v[:, :, :5]
        mask = causal_mask(5)
    expected = hand_attention(q, k, v, mask)
    fused, none = scaled_dot_product_attention(q, k, v, mask)
    explicit, weights = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
    torch_out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert none is None
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch_out, expected, atol=1e-5, rtol=1e-5)
    assert weights.shape == (2, 3, 5, k.size(2))


def test_is_causal_flag_equals_causal_mask():
    q = torch.randn(2, 2, 4, 8)
    a, _ = scaled_dot_product_attention(q, q, q, is_causal=True)
    b, _ = scaled_dot_product_attention(q, q, q, causal_mask(4))
    c, w = scaled_dot_product_attention(q, q, q, padding_mask(torch.ones(2, 4, dtype=torch.long), 0),
                                        need_weights=True, is_causal=True)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)
    assert torch.all(w.triu(1) == 0)


def test_weights_sum_to_one_zero_on_masked_and_no_nan_on_fully_padded_row():
    q, k = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 5, 4)
    mask = padding_mask(torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]]), 0)
    for need in (False, True):
        out, w = scaled_dot_product_attention(q, k, k, mask, need_weights=need)
        assert not torch.isnan(out).any()
        assert torch.all(out[1] == 0)
    assert torch.allclose(w[0].sum(-1), torch.ones(1, 3))
    assert torch.all(w[0, ..., 3:] == 0)
    assert torch.all(w[1] == 0)


def test_bad_mask_shape_is_a_clear_error():
    q = torch.randn(2, 1, 3, 4)
    with pytest.raises(ValueError, match="does not broadcast"):
        scaled_dot_product_attention(q, q, q, torch.ones(2, 1, 1, 7, dtype=torch.bool))
    with pytest.raises(TypeError, match="must be bool"):
        scaled_dot_product_attention(q, q, q, torch.ones(2, 1, 1, 3))


def copy_to_torch_mha(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    ref = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True)
    ref.in_proj_weight.data.copy_(ours.in_proj.weight)
    ref.in_proj_bias.data.copy_(ours.in_proj.bias)
    ref.out_proj.weight.data.copy_(ours.out_proj.weight)
    ref.out_proj.bias.data.copy_(ours.out_proj.bias)
    return ref.eval()


def test_multi_head_self_attention_equals_torch_with_padding_mask():
    mha = MultiHeadAttention(d_model=16, n_heads=4).eval()
    ref = copy_to_torch_mha(mha)
    x = torch.randn(2, 6, 16)
    tokens = torch.tensor([[5, 5, 5, 5, 0, 0], [5, 5, 5, 5, 5, 5]])
    out, w = mha(x, x, x, padding_mask(tokens, 0), need_weights=True)
    ref_out, ref_w = ref(x, x, x, key_padding_mask=tokens == 0, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    fused, _ = mha(x, x, x, padding_mask(tokens, 0))
    torch.testing.assert_close(fused, ref_out, atol=1e-5, rtol=1e-5)


def test_multi_head_cross_and_causal_attention_equal_torch():
    mha = MultiHeadAttention(d_model=16, n_heads=2).eval()
    ref = copy_to_torch_mha(mha)
    query, memory = torch.randn(3, 4, 16), torch.randn(3, 7, 16)
    out, w = mha(query, memory, memory, need_weights=True)
    ref_out, ref_w = ref(query, memory, memory, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    out, _ = mha(query, query, query, causal_mask(4))
    ref_out, _ = ref(query, query, query, attn_mask=~causal_mask(4)[0, 0])
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)


def test_gradcheck_attention():
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, 5, 4, dtype=torch.float64, requires_grad=True)
    mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0]]), 0)
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, need_weights=True)[0], (q, k, v))


@pytest.mark.parametrize("causal", [False, True])
def test_bf16_autocast_path_matches_fp32_and_keeps_fully_padded_rows_zero(causal):
    # Under bf16 autocast on CPU the attention core runs the explicit formula (bf16 matmuls, fp32 softmax)
    # instead of torch's kernel: same result to bf16 precision, gradients included.
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 2, 6, 8, requires_grad=True) for _ in range(3))
    mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0], [1] * 6, [0] * 6]), 0)
    ref, _ = scaled_dot_product_attention(q, k, v, mask, is_causal=causal)
    ref_grads = torch.autograd.grad(ref.sum(), (q, k, v))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, none = scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, is_causal=causal)
    grads = torch.autograd.grad(out.float().sum(), (q, k, v))
    assert none is None and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=0.05, rtol=0.05)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=0.1, rtol=0.05)
    assert torch.all(out[2] == 0)

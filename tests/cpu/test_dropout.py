import pytest
import torch

from aiayn.cpu.dropout import dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keep_mask_keeps_one_minus_p_in_every_word_position(p):
    torch.manual_seed(0)
    mask = keep_mask(torch.Size([1_000_003]), p, torch.device("cpu"))
    assert mask.dtype == torch.bool and mask.shape == (1_000_003,)
    # 4 standard deviations of a binomial over 1M draws: ~0.002
    assert abs(mask.float().mean().item() - (1 - p)) < 0.002
    # each of the four 16-bit words of a draw (one has 15 bits) keeps 1 - p on its own
    for column in mask[:1_000_000].view(-1, 4).float().mean(0).tolist():
        assert abs(column - (1 - p)) < 0.004


def test_dropout_scales_kept_elements_keeps_dtype_and_backpropagates_the_mask():
    torch.manual_seed(0)
    x = torch.randn(64, 7, 16, dtype=torch.bfloat16, requires_grad=True)
    out = dropout(x, 0.3, training=True)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    kept = out != 0
    torch.testing.assert_close(out[kept], (x[kept].float() / 0.7).bfloat16())
    (grad,) = torch.autograd.grad(out.float().sum(), x)
    torch.testing.assert_close(grad.float(), kept.float() / 0.7, atol=0.01, rtol=0.01)
    assert dropout(x, 0.3, training=False) is x and dropout(x, 0.0, training=True) is x


def test_dropout_follows_the_torch_seed():
    x = torch.ones(1000)
    torch.manual_seed(5)
    a = dropout(x, 0.3, training=True)
    torch.manual_seed(5)
    assert torch.equal(a, dropout(x, 0.3, training=True))

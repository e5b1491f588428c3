import pytest
import torch

from aiayn.cpu.linear import PACK_MIN_OUTPUTS, PackedLinear
from aiayn.cpu.prepared_weight import packs


@pytest.mark.parametrize("rows", [1, 4, PACK_MIN_OUTPUTS // 64, 300])
def test_linear_equals_torch_linear_packed_or_not(rows):
    torch.manual_seed(0)
    layer = PackedLinear(32, 64)
    x = torch.randn(rows, 3, 32)
    with torch.no_grad():
        expected = torch.nn.functional.linear(x, layer.weight, layer.bias)
        torch.testing.assert_close(layer(x), expected)
        # the packed form is made only where it is used: many rows, oneDNN present
        assert (layer._packed._prepared is not None) == (rows * 3 * 64 >= PACK_MIN_OUTPUTS and packs(layer.weight))


def test_linear_packed_weight_follows_weight_changes():
    torch.manual_seed(0)
    layer = PackedLinear(32, 64)
    x = torch.randn(400, 32)
    with torch.no_grad():
        layer(x)
        layer.weight.add_(1.0)  # an in-place update bumps the version: repacked
        torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    # a write that skips the version counter (as fused Adam's can): train()/eval() forget the packed form
    layer.weight.data.mul_(0.5)
    layer.train()
    layer.eval()
    with torch.no_grad():
        torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))


def test_linear_with_autograd_and_state_dict_as_nn_linear():
    layer = PackedLinear(8, 4)
    assert set(layer.state_dict()) == {"weight", "bias"}
    x = torch.randn(5000, 8, requires_grad=True)
    layer(x).sum().backward()  # grad mode: torch's linear, gradients flow
    assert x.grad is not None and layer.weight.grad is not None and layer._packed._prepared is None


def test_a_model_with_packed_weights_copies_and_saves(tmp_path):
    import copy

    layer = PackedLinear(128, 384)
    x = torch.randn(256, 128)
    with torch.no_grad():
        expected = layer(x)  # packs where oneDNN is present
        copied = copy.deepcopy(layer)
        torch.save(layer, tmp_path / "layer.pt")
        loaded = torch.load(tmp_path / "layer.pt", weights_only=False)
        torch.testing.assert_close(copied(x), expected)
        torch.testing.assert_close(loaded(x), expected)


@pytest.mark.parametrize("rows", [1, 4, 300])
def test_linear_without_packing_multiplies_by_the_transposed_weight(rows, monkeypatch):
    """Where packing does not pay (CPUs without AVX-512), inference multiplies by W^T kept contiguous
    (in, out): the same numbers as torch's linear, with or without a bias, and remade when W changes."""
    monkeypatch.setattr("aiayn.cpu.linear.packing_pays", lambda: False)
    torch.manual_seed(0)
    for bias in (True, False):
        layer = PackedLinear(32, 64, bias=bias)
        x = torch.randn(rows, 3, 32)
        with torch.no_grad():
            torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
            if packs(layer.weight):
                assert layer._packed._prepared.shape == (32, 64) and layer._packed._prepared.is_contiguous()
            layer.weight.add_(1.0)
            torch.testing.assert_close(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))

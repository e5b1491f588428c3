"""The native engine's compute types (aiayn.cpu.compute_types) as equivalences: log-probs within a measured
bound of float32's, cached steps equal to the full pass, a sentence's numbers independent of its batch
neighbours, every product equal to a reference computed by hand, and clear refusals."""

import pytest
import torch
import torch._inductor.config

import aiayn.cpu.compute_types as compute_types
from aiayn.cpu import compute_type_of, prepare_for_cpu, set_compute_type
from aiayn.cpu.compute_types import check_compute_type, supported_compute_types
from aiayn.cpu.linear import PackedInProjection, PackedLinear
from aiayn.cpu.output_projection import PackedOutputProjection
from aiayn.decoding.compiled import compiler_present
from aiayn.errors import AiaynError
from tests.model_helpers import PAD, random_batch, small_model, step_by_step_logprobs

needs_bfloat16 = pytest.mark.skipif("bfloat16" not in supported_compute_types(),
                                    reason="this CPU or torch build has no native bfloat16 products")
needs_int8 = pytest.mark.skipif("int8" not in supported_compute_types(),
                                reason="torch._int_mm does not run on this CPU")
LOW = [pytest.param("bfloat16", marks=needs_bfloat16), pytest.param("int8", marks=needs_int8)]

# Largest |log-prob - float32's| of the model below, teacher-forced (src 4 x 9 with padding, tgt_in 4 x 8):
# measured bfloat16 2.1e-2, int8 4.5e-2 (seeds 0-2: up to 3.0e-2 and 5.0e-2); bounds about 3x.
BOUND_VS_FLOAT32 = {"bfloat16": 0.06, "int8": 0.15}
# Cached steps against the full pass in the same compute type: measured 0 (bfloat16) and 1e-6 (int8) with a
# float32 self-attention cache, 1.6e-2 and 3.9e-2 with the cache in bfloat16 (the step's attention then
# multiplies in bfloat16, the full pass's in float32); bounds about 3x the latter. A wrong cache (a position
# off, a stale key) moves log-probs by ~1.
BOUND_STEPS = {"bfloat16": 0.05, "int8": 0.12}


@pytest.fixture
def model():
    """tiny: d_model 64, 4 heads, d_ff 256, 2 + 2 layers, 23 / 29 pieces; untrained (seed 0), dropout 0."""
    torch.manual_seed(0)
    return prepare_for_cpu(small_model("tiny"))


def _batch():
    src, tgt_in = random_batch(batch=4, src_len=9, tgt_len=8, seed=0)
    src[1, 6:] = PAD  # padded sentences: the source mask and padded rows take part
    src[3, 4:] = PAD
    return src, tgt_in


@torch.inference_mode()
def _log_probs(model, src, tgt_in):
    return model(src, tgt_in).log_softmax(-1)


@pytest.mark.parametrize("compute_type", LOW)
def test_log_probs_within_the_measured_bound_of_float32(model, compute_type):
    src, tgt_in = _batch()
    reference = _log_probs(model, src, tgt_in)
    set_compute_type(model, compute_type)
    assert compute_type_of(model) == compute_type
    low = _log_probs(model, src, tgt_in)
    error = (low - reference).abs().max().item()
    assert 0 < error < BOUND_VS_FLOAT32[compute_type]  # > 0: the products really ran in the compute type
    assert torch.equal(low.argmax(-1), reference.argmax(-1))
    set_compute_type(model, "float32")  # and back: float32's own numbers again
    torch.testing.assert_close(_log_probs(model, src, tgt_in), reference, rtol=0, atol=1e-6)


@pytest.mark.parametrize("compute_type", LOW)
def test_cached_steps_equal_the_full_pass(model, compute_type):
    src, tgt_in = _batch()
    set_compute_type(model, compute_type)
    full = _log_probs(model, src, tgt_in)
    with torch.inference_mode():
        steps, _ = step_by_step_logprobs(model, src, tgt_in)
    assert (steps - full).abs().max().item() < BOUND_STEPS[compute_type]


@pytest.mark.parametrize("compute_type", LOW)
def test_a_sentence_does_not_depend_on_its_batch_neighbours(model, compute_type):
    """Per-row activation scales (int8) and row-wise bfloat16 products: sentence 0 alone, among the batch's
    sentences, and among others (larger activations, other lengths) gives the same numbers."""
    src, tgt_in = _batch()
    others_src, others_tgt = random_batch(batch=4, src_len=9, tgt_len=8, seed=5)
    others_src[2, 3:] = PAD
    set_compute_type(model, compute_type)
    with torch.no_grad():  # neighbours whose embeddings are 10x larger: one scale per tensor would change
        model.src_embed.weight[5:] *= 10  # sentence 0's numbers with them
    others_src[1:, :] = torch.where(others_src[1:] != PAD, 5 + others_src[1:] % 10, PAD)
    src[0] = torch.where(src[0] >= 5, 3 + src[0] % 2, src[0])  # sentence 0: pieces 3 and 4 only
    alone = _log_probs(model, src[:1], tgt_in[:1])[0]
    batches = [(src, tgt_in), (torch.cat([src[:1], others_src[1:]]), torch.cat([tgt_in[:1], others_tgt[1:]]))]
    tolerance = 1e-6 if compute_type == "int8" else 1e-5
    for batch_src, batch_tgt in batches:
        torch.testing.assert_close(_log_probs(model, batch_src, batch_tgt)[0], alone, rtol=0, atol=tolerance)
        with torch.inference_mode():
            steps, _ = step_by_step_logprobs(model, batch_src, batch_tgt)
            alone_steps, _ = step_by_step_logprobs(model, src[:1], tgt_in[:1])
        torch.testing.assert_close(steps[0], alone_steps[0], rtol=0, atol=tolerance)


def _int8_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """By hand in float64: W quantized per output channel (max |w| / 127 per row), x per row the same way,
    the integer product exact, scaled back."""
    x, weight = x.double(), weight.double()
    w_scale = weight.abs().amax(1) / 127  # (out,)
    w_q = torch.round(weight / w_scale[:, None]).clamp(-127, 127)
    x_scale = x.abs().amax(1, keepdim=True) / 127  # (R, 1)
    x_q = torch.round(x / x_scale)
    out = (x_q @ w_q.T) * x_scale * w_scale
    return out if bias is None else out + bias.double()


def _bfloat16_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x.bfloat16() @ W.bfloat16()^T (+ b.bfloat16()), the sums exact (float64)."""
    out = x.bfloat16().double() @ weight.bfloat16().double().T
    return out if bias is None else out + bias.bfloat16().double()


def _check_product(out: torch.Tensor, reference: torch.Tensor, compute_type: str) -> None:
    assert out.dtype == torch.float32
    if compute_type == "int8":  # the scaling in float32: a few float32 roundings of the exact result
        torch.testing.assert_close(out.double(), reference, rtol=1e-6, atol=1e-6)
    else:  # oneDNN accumulates in float32 and rounds its output to bfloat16: within one bfloat16 step
        torch.testing.assert_close(out.double(), reference, rtol=2 ** -8, atol=1e-6)


@pytest.mark.parametrize("compute_type", LOW)
@pytest.mark.parametrize("rows", [1, 5, 300])
def test_each_product_equals_the_reference_by_hand(compute_type, rows):
    torch.manual_seed(rows)
    reference = _int8_reference if compute_type == "int8" else _bfloat16_reference
    layer, projection = PackedLinear(48, 40), PackedOutputProjection(48, 200, bias=False)
    stacked = PackedInProjection(48, 3 * 48)
    for module in (layer, projection, stacked):
        module.compute_type = compute_type
    x = torch.randn(rows, 2, 48) * torch.rand(rows, 2, 1) * 4  # rows of different scales
    rows_in, kv = x.view(-1, 48), slice(48, 3 * 48)  # K and V of [W^Q; W^K; W^V], quantized by their own rows
    with torch.inference_mode():
        products = {"linear": layer(x), "output projection": projection(x), "K and V": stacked.blocks(x, 1, 3),
                    "traced (aiayn.decoding.compiled)": compute_types.traced_linear(
                        x, compute_types.traced_weight(layer.weight, compute_type), layer.bias, compute_type)}
    expected = {"linear": reference(rows_in, layer.weight, layer.bias),
                "output projection": reference(rows_in, projection.weight, None),
                "K and V": reference(rows_in, stacked.weight[kv], stacked.bias[kv]),
                "traced (aiayn.decoding.compiled)": reference(rows_in, layer.weight, layer.bias)}
    for name, out in products.items():
        assert out.shape[:2] == (rows, 2), name
        _check_product(out.reshape(-1, out.size(-1)), expected[name].detach(), compute_type)


def _int8_bfloat16_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """W quantized per output channel (max |w| / 127 per row), its scales in bfloat16; x rounded to bfloat16,
    not quantized; the sums exact (float64); without the bias."""
    weight = weight.double()
    w_scale = (weight.abs().amax(1) / 127).float()  # (out,), as int8_weight makes it
    w_q = torch.round(weight / w_scale.double()[:, None]).clamp(-127, 127)
    return (x.bfloat16().double() @ w_q.T) * w_scale.bfloat16().double()


class _FewRows(torch.nn.Module):
    """A linear layer's product as the compiled step makes it at few rows: the weight's form in buffers."""

    def __init__(self, layer: torch.nn.Linear, products: str):
        super().__init__()
        self.products, form = products, compute_types.traced_weight(layer.weight, products)
        for i, tensor in enumerate(form):
            self.register_buffer(f"w_{i}", tensor)
        self.parts = len(form)
        self.register_buffer("bias", layer.bias.detach().clone())

    def forward(self, x):
        form = tuple(getattr(self, f"w_{i}") for i in range(self.parts))
        return compute_types.traced_linear(x, form, self.bias, self.products)


def test_the_few_rows_products_follow_the_cpu(monkeypatch):
    assert compute_types.traced_products("int8", few_rows=False) == "int8"
    assert compute_types.traced_products("bfloat16", few_rows=True) == "bfloat16"
    for vnni, products in ((True, "int8_uint8"), (False, "int8_bfloat16")):
        monkeypatch.setattr(compute_types, "_has_int8_dot_products", lambda vnni=vnni: vnni)
        assert compute_types.traced_products("int8", few_rows=True) == products


def _compiled_like_the_step(product: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """product(x) compiled as the compiled step's package is: the weight frozen into a constant (the C++
    template needs that), inductor's C++ GEMMs only, without grad (the freezing passes run only then)."""
    if not compiler_present():
        pytest.skip("inductor needs a C++ compiler")
    config = dict(freezing=True, max_autotune=True, max_autotune_gemm_backends="CPP")
    with torch._inductor.config.patch(**config), torch.no_grad():
        return torch.compile(product, dynamic=False)(x)


@pytest.mark.parametrize("rows", [1, 4, 60])
@pytest.mark.parametrize("traced", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_int8_weights_by_bfloat16_inputs_equal_the_reference_by_hand(rows, traced):
    """The products of the compiled int8 step for few rows on a CPU without VNNI: eagerly, and as inductor's
    C++ GEMM template makes them (traced: torch.compile, as the compiled step's package does)."""
    if "int8" not in compute_types.supported_compute_types():
        pytest.skip("this CPU or torch build runs no int8")
    torch.manual_seed(rows)
    layer = torch.nn.Linear(48, 40)
    x = torch.randn(rows, 48) * torch.rand(rows, 1) * 4
    product = _FewRows(layer, "int8_bfloat16").eval()
    if traced:
        out = _compiled_like_the_step(product, x)
    else:
        with torch.inference_mode():
            out = product(x)
    assert out.dtype == torch.float32 and out.shape == (rows, 40)
    # accumulated in float32, the product and its scaling each rounded to bfloat16 before the bias is added:
    # within two bfloat16 steps of the product (not of the sum with the bias, which may nearly cancel it)
    product = _int8_bfloat16_reference(x, layer.weight).detach()
    error = (out.double() - (product + layer.bias.detach().double())).abs()
    assert (error <= product.abs() * 2 ** -7 + 1e-5).all(), error.max()
    # and not the float32 product: the weight is quantized (a check that could fail if it were not)
    assert not torch.allclose(out, layer(x).detach(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("rows", [1, 4, 60])
@pytest.mark.parametrize("traced", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_int8_by_uint8_rows_equal_the_int8_reference_by_hand(rows, traced):
    """The int8 products of the compiled step for few rows on a VNNI CPU: int8_project's numbers (per-row
    input scales), eagerly and as inductor's u8s8 GEMM makes them (traced)."""
    if "int8" not in compute_types.supported_compute_types():
        pytest.skip("this CPU or torch build runs no int8")
    if traced and not compute_types._has_int8_dot_products():
        pytest.skip("inductor's u8s8 GEMM needs AVX-512 VNNI or AMX")
    torch.manual_seed(rows)
    layer = torch.nn.Linear(48, 40)
    x = torch.randn(rows, 48) * torch.rand(rows, 1) * 4  # rows of different scales
    product = _FewRows(layer, "int8_uint8").eval()
    if traced:
        out = _compiled_like_the_step(product, x)
    else:
        with torch.inference_mode():
            out = product(x)
    assert out.shape == (rows, 40)
    _check_product(out, _int8_reference(x, layer.weight, layer.bias).detach(), "int8")
    # each row by its own scale: a row's product does not change with its neighbours
    with torch.inference_mode():
        alone = product(x[:1] * 1.0)
    torch.testing.assert_close(alone, out[:1], rtol=1e-6, atol=1e-6)


def test_an_rnn_runs_float32_only():
    model = prepare_for_cpu(small_model("rnn-luong", d_model=32))
    for compute_type in ("bfloat16", "int8"):
        if compute_type in supported_compute_types():
            with pytest.raises(AiaynError, match=f"--compute-type {compute_type}") as err:
                set_compute_type(model, compute_type)
            assert "\n" not in str(err.value) and "float32" in str(err.value)
    set_compute_type(model, "float32")
    assert compute_type_of(model) == "float32"


def test_a_compute_type_it_cannot_run_names_what_it_can(monkeypatch):
    monkeypatch.setattr(compute_types, "supported_compute_types", lambda: ("float32",))
    with pytest.raises(AiaynError, match="--compute-type bfloat16") as err:
        check_compute_type("bfloat16")
    assert "runs float32" in str(err.value) and "\n" not in str(err.value)
    check_compute_type("float32")
    with pytest.raises(AiaynError, match="--compute-type int3") as err:
        check_compute_type("int3")
    assert all(name in str(err.value) for name in ("float32", "bfloat16", "int8"))
    with pytest.raises(AiaynError, match="float32"):  # a low-precision type off the CPU
        check_compute_type("int8", "cuda")

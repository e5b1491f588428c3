"""Compute types of the native engine, spelled as CTranslate2 spells them: the precision of the products
by the model's weights at inference (decoding and scoring).

  float32   the weights as trained (the default)
  bfloat16  weights stored in bfloat16 and packed for oneDNN once; each product casts its input rows to
            bfloat16 and its output back to float32, so the residual stream, LayerNorm, softmax (attention
            and the output's log-softmax) stay in float32
  int8      weights quantized to int8 per output channel (scale = max |w| / 127 per row of W); each
            product quantizes its input per row at run time (scale = max |x| / 127 per row), multiplies
            int8 x int8 -> int32 (torch._int_mm) and scales back to float32. Per-row input scales keep a
            sentence's numbers independent of its batch neighbours (one scale per tensor, as torch.ao's
            dynamic quantization uses, would not); CTranslate2's int8 does the same. The compiled decoder
            (--compile), at steps of few rows and in its encoder, makes the same products with inductor's
            own VNNI GEMM (on a CPU without VNNI: int8 weights by bfloat16 inputs), see traced_products.

Only the products by weights change: the attention products QK^T and softmax x V, embeddings, LayerNorm
and the log-softmax run in float32. Measured on a 2-core AMD EPYC with AVX512-BF16, one thread, a
(64, 512) x (512, 2048) product (a decoding step of batch 16, beam 4): float32 packed 545 us, bfloat16 297 us,
int8 257 us with the per-row quantization included (bench/decode_speed.py gives whole-decoding figures).
"""

import functools

import torch
from torch import nn

from aiayn.errors import AiaynError

COMPUTE_TYPES = ("float32", "bfloat16", "int8")


@functools.cache
def supported_compute_types() -> tuple[str, ...]:
    """The compute types this CPU and torch build run: bfloat16 where oneDNN has a bfloat16 path (AVX-512
    or AMX), int8 where torch._int_mm runs on the CPU."""
    found = ["float32"]
    if torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported():
        found.append("bfloat16")
    try:
        torch._int_mm(torch.ones(4, 8, dtype=torch.int8), torch.ones(8, 8, dtype=torch.int8))
        found.append("int8")
    except RuntimeError:
        pass
    return tuple(found)


def check_compute_type(compute_type: str, device: torch.device | str = "cpu") -> None:
    """One line naming the compute type and the ones this engine can run here, when it cannot run it."""
    if compute_type not in COMPUTE_TYPES:
        raise AiaynError(f"--compute-type {compute_type}: the native engine runs {', '.join(COMPUTE_TYPES)} "
                         f"(other CTranslate2 types: --engine ct2)")
    if compute_type == "float32":
        return
    if torch.device(device).type != "cpu":
        raise AiaynError(f"--compute-type {compute_type}: the native engine's low-precision products are CPU "
                         f"products; on {device} use float32 (the default)")
    if compute_type not in supported_compute_types():
        raise AiaynError(f"--compute-type {compute_type}: this CPU or torch build cannot run it natively; it runs "
                         f"{', '.join(supported_compute_types())}")


# ---- weights: the inference form of a (out, in) weight, made once (aiayn.cpu.prepared_weight) ------------
def bfloat16_weight(weight: torch.Tensor) -> torch.Tensor:
    """(out, in) float32 -> (out, in) bfloat16 packed in oneDNN's blocked layout."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(torch.bfloat16))


def int8_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, in) float32 -> (W_q^T (in, out) int8 contiguous, scale (out,) float32): W ~ W_q * scale per row."""
    weight = weight.detach().float()
    scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0  # (out,)
    quantized = torch.round(weight / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return quantized.t().contiguous(), scale


# ---- products: x_rows (R, in) float32 by a prepared weight -> (R, out) float32 ---------------------------
def bfloat16_project(x_rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    bias = None if bias is None else bias.to(torch.bfloat16)
    return torch.ops.mkldnn._linear_pointwise(x_rows.to(torch.bfloat16), weight, bias, "none", [], "").float()


def int8_project(x_rows: torch.Tensor, weight: tuple[torch.Tensor, torch.Tensor],
                 bias: torch.Tensor | None) -> torch.Tensor:
    # few small operations around the product: at 4 rows (beam 4, batch 1) they cost more than it. The row
    # maxima as abs().amax, not vector_norm(ord=inf): 24 against 486 us for (1280, 128), one thread
    quantized_t, w_scale = weight
    x_scale = x_rows.abs().amax(dim=1, keepdim=True).clamp_min_(1e-12).div_(127.0)
    x_q = (x_rows / x_scale).round_().to(torch.int8)  # (R, in)
    out = torch._int_mm(x_q, quantized_t).mul(w_scale)  # int32 x float32 scales -> (R, out) float32
    return out.mul_(x_scale) if bias is None else torch.addcmul(bias, out, x_scale)


# ---- traced code (aiayn.decoding.compiled): the weight's form made once, kept as a buffer of the traced module --
# The products a traced step makes, by compute type and by how many rows it multiplies. At few rows (a
# decoding step of batch 1 to 4, beam 4) a product streams its weight from memory and does little with each
# byte, so what counts is the bytes read and how little is done to them:
#   "int8_uint8"     int8 x int8 as int8_project makes it (per-row input scales), written so that inductor
#                    makes it its own u8s8 GEMM of AVX-512 VNNI (or AMX): the weight's bytes are multiplied
#                    as they are read (_uint8_project). Inductor compiles that only where the CPU has VNNI.
#   "int8_bfloat16"  elsewhere: int8 weights by bfloat16 inputs (weight-only quantization), inductor's C++
#                    GEMM converting each weight byte to bfloat16 before it multiplies.
# The (4, 128) x (128, 10000) output layer, one thread, EPYC-F: float32 100 us, int8_bfloat16 61 us,
# torch._int_mm 89 us (oneDNN; it needs 17 rows or more). At many rows oneDNN's int8 x int8 products win.
@functools.cache
def _has_int8_dot_products() -> bool:
    """AVX-512 VNNI or AMX as torch's compiler sees the CPU (AVX-VNNI without AVX-512 has no u8s8 GEMM of
    inductor's): the instructions its u8s8 GEMM is made of."""
    from torch._inductor.cpu_vec_isa import VecAVX512VNNI, pick_vec_isa  # AMX's class is a subclass

    return isinstance(pick_vec_isa(), VecAVX512VNNI)


def traced_products(compute_type: str, few_rows: bool) -> str:
    """The products of a traced step: the compute type's own, or for int8 at few rows "int8_uint8" (or
    "int8_bfloat16" on a CPU without VNNI)."""
    if compute_type == "int8" and few_rows:
        return "int8_uint8" if _has_int8_dot_products() else "int8_bfloat16"
    return compute_type


def traced_weight(weight: torch.Tensor, products: str) -> tuple[torch.Tensor, ...]:
    """(out, in) float32 -> the tensors traced_linear multiplies by: the (out, in) bfloat16 weight;
    int8_weight's pair; for "int8_bfloat16" the (out, in) int8 weight and its (out,) bfloat16 scales (the
    form torch._weight_int8pack_mm takes); for "int8_uint8" the (out, in) int8 weight, its (out,) float32
    scales and (out,) zero points (all 0: symmetric). Made before tracing: converted inside the trace, inductor did not
    fold the conversion into a constant, and the compiled int8 step re-quantized every weight at every step
    (1.0 against 9.0 sentences/s at paper-base size, batch 1)."""
    if products == "bfloat16":
        return (weight.detach().to(torch.bfloat16),)
    quantized_t, scale = int8_weight(weight)
    if products == "int8_bfloat16":
        return quantized_t.t().contiguous(), scale.to(torch.bfloat16)
    if products == "int8_uint8":
        return quantized_t.t().contiguous(), scale, torch.zeros(scale.size(0), dtype=torch.long)
    return quantized_t, scale


def _uint8_project(x_rows: torch.Tensor, form: tuple[torch.Tensor, ...], bias: torch.Tensor | None) -> torch.Tensor:
    """int8_project's numbers (per-row input scales, per-channel weight scales) written as the dequantize ->
    linear pattern inductor turns into its u8s8 GEMM (AVX-512 VNNI): the rows quantized to -127..127 and
    shifted by 128 into uint8 (VNNI multiplies unsigned by signed bytes), dequantized with scale 1 and zero
    point 128, so the product is the int8 one; each row's scale is applied after it."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401  registers torch.ops.quantized_decomposed (10 ms)

    weight_q, w_scale, w_zero = form
    x_scale = x_rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-12).div(127.0)  # (R, 1)
    x_q = (x_rows / x_scale).round().add(128).to(torch.uint8)  # (R, in)
    ops = torch.ops.quantized_decomposed
    x_int = ops.dequantize_per_tensor(x_q, 1.0, 128, 0, 255, torch.uint8)
    w = ops.dequantize_per_channel(weight_q, w_scale, w_zero, 0, -128, 127, torch.int8)
    out = nn.functional.linear(x_int, w) * x_scale
    return out if bias is None else out + bias


def traced_linear(x: torch.Tensor, form: tuple[torch.Tensor, ...], bias: torch.Tensor | None,
                  products: str) -> torch.Tensor:
    """x (..., in) by a weight in traced_weight's form -> (..., out) float32."""
    rows = x.reshape(-1, x.size(-1))
    if products == "bfloat16":
        bias = None if bias is None else bias.to(torch.bfloat16)
        out = nn.functional.linear(rows.to(torch.bfloat16), form[0], bias).float()
    elif products == "int8_bfloat16":
        out = torch._weight_int8pack_mm(rows.to(torch.bfloat16), *form).float()
        out = out if bias is None else out + bias
    elif products == "int8_uint8":
        out = _uint8_project(rows, form, bias)
    else:
        out = int8_project(rows, form, bias)
    return out.view(*x.shape[:-1], out.size(-1))

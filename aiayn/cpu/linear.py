"""Linear layers that multiply through oneDNN with a packed weight where that is faster.

A decoding step of beam search at batch 64 multiplies 256 rows (sentences x beams) by every small weight of
the decoder; encoding multiplies B x S rows. On CPU in float32, oneDNN's linear with its weight packed once
into its blocked layout (torch.ops.mkldnn, prepared_weight.py) was faster than
torch.nn.functional.linear from about 8192 outputs (rows x out_features) up, about half the time at 256
rows, and slower below (its call costs ~12 us, against ~8 us for a 4-row product), measured on a 2-core
AVX-512 CPU for the d_model-128 shapes (BENCHMARKS.md, decoding speed). Both gave the same numbers there.
So `linear` packs only for products that large, only without autograd (inference, validation) and outside
autocast (whose bf16 casts it would skip); training is untouched. All that was on a CPU with AVX-512.
On an AVX2-only CPU (an "AMD EPYC") the packed product was 0-22% slower than torch's for these small weights at
256 rows (still faster for the (10000, 128) output projection, which output_projection.py packs anyway), so
there `linear` does not pack. There it multiplies by W^T stored contiguous, (in, out), with addmm instead:
beam search with those products was 4-5% faster at batch 1 and batch 64 than with torch's linear on the
(out, in) weight (interleaved runs, the same outputs; BENCHMARKS.md, decoding speed).
"""

import contextlib
import functools

import torch
from torch import nn

from aiayn.cpu.compute_types import bfloat16_project, int8_project, traced_linear, traced_weight
from aiayn.cpu.prepared_weight import PreparedWeight, packs
from aiayn.model.attention import InProjection

PACK_MIN_OUTPUTS = 8192  # rows x out_features from which the packed product is faster (measured, see above)


@functools.cache
def packing_pays() -> bool:
    """Whether this CPU has AVX-512, where packed small products were measured faster (see above)."""
    return torch.backends.cpu.get_cpu_capability() == "AVX512"


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, prepared: PreparedWeight,
           compute_type: str = "float32") -> torch.Tensor:
    """x (..., in) -> (..., out) = x W^T + b; `prepared` caches W's inference form (kept until W changes):
    oneDNN-packed on AVX-512 CPUs for large products, else W^T contiguous (see above); in a low-precision
    compute type (aiayn.cpu.compute_types) its bfloat16 or int8 form, at every size."""
    if (x.dtype != torch.float32 or not packs(weight) or torch.is_autocast_enabled("cpu")
            or torch.compiler.is_compiling()):  # training, bf16, GPU, or traced (compiled.py): torch's own product
        # traced: float32 only (a low-precision compiled step multiplies by its own frozen forms)
        assert compute_type == "float32" or not torch.compiler.is_compiling()
        return nn.functional.linear(x, weight, bias)
    rows = x.numel() // x.size(-1)
    if compute_type != "float32":
        out = typed_project(x.reshape(rows, x.size(-1)), prepared.get(weight, compute_type=compute_type), bias,
                            compute_type)
        return out.view(*x.shape[:-1], weight.size(0))
    pack = packing_pays()
    if pack and rows * weight.size(0) < PACK_MIN_OUTPUTS:  # too small a product to gain from packing
        return nn.functional.linear(x, weight, bias)
    out = project(x.reshape(rows, x.size(-1)), prepared.get(weight, pack=pack), bias)  # (rows, out)
    return out.view(*x.shape[:-1], weight.size(0))


def typed_project(x_rows: torch.Tensor, prepared, bias: torch.Tensor | None, compute_type: str) -> torch.Tensor:
    """x_rows (R, in) by a weight prepared in `compute_type` -> (R, out) float32."""
    if compute_type == "bfloat16":
        return bfloat16_project(x_rows, prepared, bias)
    if compute_type == "int8":
        return int8_project(x_rows, prepared, bias)
    return project(x_rows, prepared, bias)


def project(x_rows: torch.Tensor, prepared: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x_rows (R, in) by a weight in `prepare`'s form (oneDNN-packed (out, in), or (in, out) contiguous)
    -> (R, out)."""
    if prepared.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(x_rows, prepared, bias, "none", [], "")
    return x_rows @ prepared if bias is None else torch.addmm(bias, x_rows, prepared)


TRACED = "traced_form"  # the buffers' names while traced_forms holds them


@contextlib.contextmanager
def traced_forms(modules: list[nn.Module], products: str, blocks: tuple[int, int] | None = None):
    """For the time of a trace (torch.export), each PackedLinear of `modules` holds its weight in
    compute_types.traced_weight's form for `products` as non-persistent buffers (with `blocks` (first, last),
    that row block of a PackedInProjection instead), and its traced product multiplies by them: the weights'
    low-precision forms become constants of the compiled code, made once (converted inside the trace, they were
    converted at every call). Gone afterwards: the model saves and decodes as before."""
    held = []
    try:
        for module in modules:
            weight, name = module.weight, TRACED
            if blocks is not None:
                first, last = blocks
                weight, name = weight[first * module.in_features:last * module.in_features], f"{TRACED}_{first}_{last}"
            form = traced_weight(weight, products)
            for i, tensor in enumerate(form):
                module.register_buffer(f"{name}_{i}", tensor, persistent=False)
                held.append((module, f"{name}_{i}"))
            if blocks is None:
                module.register_buffer(TRACED, torch.empty(0), persistent=False)
                held.append((module, TRACED))
            module.traced_products, module.traced_parts = products, len(form)
        yield
    finally:
        for module, name in held:
            del module._buffers[name]


class PackedLinear(nn.Linear):
    """nn.Linear (the same parameters, the same checkpoints) whose inference-time products go through
    `linear`, in its `compute_type` (set by prepare_for_cpu). `of` makes one from a model's nn.Linear."""

    compute_type = "float32"  # a class default: modules made by `of` on the meta device need no __init__ call

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self._packed = PreparedWeight()  # the inference form of weight: not a parameter or buffer, never saved

    @classmethod
    def of(cls, plain: nn.Linear) -> nn.Linear:
        """`plain` itself when it is one already (so preparing twice changes nothing), else one of this class
        holding plain's own weight and bias Parameters: tied weights stay tied, an optimizer's references
        stay valid, the state_dict keys and values are plain's. Built on the meta device: no memory, no
        draws from the random generator (training's RNG stream is unchanged)."""
        if isinstance(plain, cls):
            return plain
        fast = cls(plain.in_features, plain.out_features, plain.bias is not None, device="meta")
        fast.weight, fast.bias = plain.weight, plain.bias
        return fast.train(plain.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if TRACED in self._buffers and torch.compiler.is_compiling():  # see traced_forms (eager: one dict lookup)
            return traced_linear(x, self._traced_form(TRACED), self.bias, self.traced_products)
        return linear(x, self.weight, self.bias, self._packed, self.compute_type)

    def _traced_form(self, name: str) -> tuple[torch.Tensor, ...]:
        return tuple(self._buffers[f"{name}_{i}"] for i in range(self.traced_parts))

    def train(self, mode: bool = True):
        """Forgets the packed weight: an optimizer may have changed the weight without a version bump
        (see PreparedWeight); nn.Module.train/eval reach every submodule, so a model's switch clears all."""
        self._packed.clear()
        return super().train(mode)


class PackedInProjection(PackedLinear, InProjection):
    """A multi-head attention's stacked [W^Q; W^K; W^V] (InProjection) whose products, of the whole weight
    and of its row blocks (Q alone, K, V, [K; V]), go through `linear`, each block's packed form kept."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self._packed_blocks = {}  # (first, last) -> PreparedWeight of those rows; attention asks for 4 kinds

    def blocks(self, x: torch.Tensor, first: int, last: int) -> torch.Tensor:
        rows = slice(first * self.in_features, last * self.in_features)
        bias = None if self.bias is None else self.bias[rows]
        if self._buffers and torch.compiler.is_compiling():  # see traced_forms (eager: no buffers, one test)
            name = f"{TRACED}_{first}_{last}"
            if f"{name}_0" in self._buffers:
                return traced_linear(x, self._traced_form(name), bias, self.traced_products)
        packed = self._packed_blocks.get((first, last))
        if packed is None:
            packed = self._packed_blocks[first, last] = PreparedWeight()
        return linear(x, self.weight[rows], bias, packed, self.compute_type)

    def train(self, mode: bool = True):
        for packed in self._packed_blocks.values():  # as PackedLinear.train: an optimizer may skip version bumps
            packed.clear()
        return super().train(mode)

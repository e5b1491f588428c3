"""The output projection of a decoding step (logits = h W^T + b, §3.4), in the fastest form measured here.

A step multiplies R rows (beams x sentences: 4 at batch 1, up to 256 at batch 64 with beam 4) by the
(V, D) weight, the largest single cost of a small model's step. On CPU in float32, oneDNN's linear with
the weight packed once into its blocked layout (torch.ops.mkldnn, the ops behind torch.compile's CPU
weight freezing) took 1.3-3x less time than torch.nn.functional.linear for (V, D) = (10000, 128) and
R = 4..256 on an AVX-512 CPU (BENCHMARKS.md, decoding speed). Elsewhere (CUDA, bf16, a torch without oneDNN, or
with autograd on) the weight is transposed to (D, V) and made contiguous, which was still ~20% faster
than linear on (V, D). Either way the prepared weight is computed once per weight version: training
updates weights in place, which bumps the version, so it is never stale.
"""

import functools

import torch


@functools.cache
def _onednn_present() -> bool:
    # asked once: a decoding step asks `packs` about 25 times, and these two lookups were most of its cost
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


def packs(weight: torch.Tensor) -> bool:
    return (not torch.is_grad_enabled() and weight.device.type == "cpu" and weight.dtype == torch.float32
            and _onednn_present())


def prepare(weight: torch.Tensor, pack: bool = True) -> torch.Tensor:
    """(V, D) weight -> the form `project` takes: oneDNN-packed (V, D) where `pack` and `packs(weight)`,
    else (D, V) contiguous."""
    with torch.no_grad():
        if pack and packs(weight):
            return torch.ops.mkldnn._reorder_linear_weight(weight.detach())
        return weight.detach().t().contiguous()


def project(hidden: torch.Tensor, prepared: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """hidden (R, D) -> logits (R, V)."""
    if prepared.is_mkldnn:
        return torch.ops.mkldnn._linear_pointwise(hidden, prepared, bias, "none", [], "")
    return hidden @ prepared if bias is None else torch.addmm(bias, hidden, prepared)


class PreparedWeight:
    """`prepare(weight)`, kept until the weight changes (another tensor, version, dtype or device, or the
    grad mode that decides the form) or `clear()` is called. The version alone does not see every update:
    torch's fused Adam (`fused=True`, what the trainer uses) writes parameters without bumping it, so the
    model clears this whenever it switches between train and eval mode."""

    def __init__(self):
        self._key, self._prepared = None, None

    # A copy or a pickle of a model starts without the cache: oneDNN's packed tensors have no storage to
    # copy (copy.deepcopy and torch.save of a whole module would fail), and the cache is remade on use.
    def __deepcopy__(self, memo) -> "PreparedWeight":
        return PreparedWeight()

    def __getstate__(self) -> dict:
        return {"_key": None, "_prepared": None}

    def clear(self) -> None:
        self._key, self._prepared = None, None

    def get(self, weight: torch.Tensor, pack: bool = True) -> torch.Tensor:
        """prepare(weight, pack), made again only when the weight or the form asked for changes."""
        key = (weight.data_ptr(), weight._version, weight.dtype, weight.device, pack and packs(weight))
        if key != self._key:
            self._key, self._prepared = key, prepare(weight, pack)
        return self._prepared

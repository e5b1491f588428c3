"""A weight's inference form, made once per weight version: oneDNN-packed or W^T contiguous.

oneDNN's linear (torch.ops.mkldnn, the ops behind torch.compile's CPU weight freezing) multiplies by a weight
packed once into its blocked layout; where it cannot run (CUDA, bf16, a torch without oneDNN, or with autograd
on) the weight is transposed to (in, out) and made contiguous. Where each form was measured faster:
linear.py and output_projection.py. Either way the prepared weight is computed once per weight version:
training updates weights in place, which bumps the version, so it is never stale.
"""

import functools

import torch

from aiayn.cpu.compute_types import bfloat16_weight, int8_weight


@functools.cache
def _onednn_present() -> bool:
    # asked once: a decoding step asks `packs` about 25 times, and these two lookups were most of its cost
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


def packs(weight: torch.Tensor) -> bool:
    """Whether `weight` can take the oneDNN-packed form here: float32 on a CPU with oneDNN, autograd off."""
    return (not torch.is_grad_enabled() and weight.device.type == "cpu" and weight.dtype == torch.float32
            and _onednn_present())


def prepare(weight: torch.Tensor, pack: bool = True, compute_type: str = "float32"):
    """(out, in) weight -> oneDNN-packed (out, in) where `pack` and `packs(weight)`, else (in, out)
    contiguous; in a low-precision compute type its form there (aiayn.cpu.compute_types)."""
    with torch.no_grad():
        if compute_type == "bfloat16":
            return bfloat16_weight(weight)
        if compute_type == "int8":
            return int8_weight(weight)
        if pack and packs(weight):
            return torch.ops.mkldnn._reorder_linear_weight(weight.detach())
        return weight.detach().t().contiguous()


class PreparedWeight:
    """`prepare(weight)`, kept until the weight changes (another tensor, version, dtype or device, or the
    grad mode that decides the form) or `clear()` is called. The version alone does not see every update:
    torch's fused Adam (`fused=True`, what the trainer uses) writes parameters without bumping it, so the
    modules holding one clear it whenever they switch between train and eval mode."""

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

    def get(self, weight: torch.Tensor, pack: bool = True, compute_type: str = "float32"):
        """prepare(weight, pack, compute_type), made again only when the weight or the form asked for changes."""
        key = (weight.data_ptr(), weight._version, weight.dtype, weight.device, pack and packs(weight), compute_type)
        if key != self._key:
            self._key, self._prepared = key, prepare(weight, pack, compute_type)
        return self._prepared

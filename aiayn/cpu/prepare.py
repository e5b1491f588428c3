"""prepare_for_cpu: the one step that puts the CPU speed-ups into a model built from aiayn.model.

The model stays the paper's: nn.Linear products, nn.Dropout, logits = h W^T + b. This swaps, in place, the
Transformer's pieces for subclasses that compute the same thing faster on a CPU (each measured in its
module's docstring):
  attention in_proj/out_proj, FFN w_1/w_2 -> PackedLinear / PackedInProjection (linear.py): inference
      products through oneDNN-packed weights or W^T kept contiguous
  the output projection `generator`      -> PackedOutputProjection (output_projection.py): the weight
      prepared once per version for decoding steps and scoring
  residual and embedding dropout         -> FastDropout (dropout.py): a quarter of torch's random draws
Every swapped module keeps the plain one's Parameters (state_dict keys and values, weight tying and
checkpoints unchanged); training products (autograd on) are torch's own, so only the dropout masks differ
from the plain model's. The RNN seq2seq is left as it is. Elsewhere than a float32 CPU each piece falls back
to torch's own product or mask, so preparing a model for a GPU is harmless. Preparing twice changes nothing.
"""

import torch
from torch import nn

from aiayn.cpu.compute_types import check_compute_type
from aiayn.cpu.dropout import FastDropout
from aiayn.cpu.linear import PackedInProjection, PackedLinear
from aiayn.cpu.output_projection import PackedOutputProjection
from aiayn.errors import AiaynError
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.transformer import DecoderLayer, EncoderLayer, Transformer


def prepare_for_cpu(model: nn.Module, compute_type: str | None = None) -> nn.Module:
    """Swaps the fast modules into `model` (a Transformer, or anything holding some: an ensemble) in
    place and returns it. compute_type: the precision of their inference products (aiayn.cpu.compute_types;
    None: keep what they have, float32 when new)."""
    _swap_modules(model)
    if compute_type is not None:
        set_compute_type(model, compute_type)
    return model


def set_compute_type(model: nn.Module, compute_type: str) -> None:
    """Every prepared product of `model` in `compute_type`; a model without any (an RNN) runs float32 only."""
    check_compute_type(compute_type)
    packed = [m for m in model.modules() if isinstance(m, PackedLinear)]
    if compute_type != "float32" and not packed:
        raise AiaynError(f"--compute-type {compute_type}: low-precision products cover the Transformer; this "
                         f"model decodes in float32 (drop --compute-type)")
    for module in packed:
        module.compute_type = compute_type
    for module in model.modules():  # the decoding cache in bfloat16 (MultiHeadAttention.cache_dtype)
        if isinstance(module, MultiHeadAttention):
            module.cache_dtype = None if compute_type == "float32" else torch.bfloat16


def compute_type_of(model: nn.Module) -> str:
    """The compute type of `model`'s prepared products (float32 when it has none)."""
    return next((m.compute_type for m in model.modules() if isinstance(m, PackedLinear)), "float32")


def _swap_modules(model: nn.Module) -> None:
    for module in list(model.modules()):
        if isinstance(module, MultiHeadAttention):
            module.in_proj = PackedInProjection.of(module.in_proj)
            module.out_proj = PackedLinear.of(module.out_proj)
        elif isinstance(module, PositionwiseFeedForward):
            module.w_1, module.w_2 = PackedLinear.of(module.w_1), PackedLinear.of(module.w_2)
        elif isinstance(module, (EncoderLayer, DecoderLayer)):
            module.residual_dropout = FastDropout.of(module.residual_dropout)
        elif isinstance(module, Transformer):
            module.embed_dropout = FastDropout.of(module.embed_dropout)
            module.generator = PackedOutputProjection.of(module.generator)

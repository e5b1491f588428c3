"""Every attention sublayer of a Transformer, teacher-forced, with what its decomposition needs: the
residual stream it reads, the vectors its values come from, its attention weights (the maps that capture
returns) and its actual output. Every number comes from the model's own modules, in the model's order
(§3.1: self-attention, in the decoder cross-attention, then the FFN), so the outputs are the model's.

Shapes: B batch, S source length, T target length, D d_model, H heads; Q queries, K keys of a sublayer.
"""

from dataclasses import dataclass

import torch
from torch import nn

from aiayn.inspect.maps.checks import InspectError
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.masks import padding_mask


@dataclass
class SublayerTrace:
    """One attention sublayer of one layer, as it ran.

    x        (B, Q, D) the residual stream the sublayer adds to (token i's own vector)
    values   (B, K, D) what W^V reads: the sublayer input (LayerNorm(x) pre-LN) for self-attention, the
             encoder output (memory) for cross-attention
    weights  (B, H, Q, K) alpha, rows sum to 1 (a fully masked row is 0)
    output   (B, Q, D) the sublayer's output: LayerNorm(x + MultiHead(...)) post-LN, x + MultiHead(...) pre-LN
    """

    kind: str  # "encoder_self", "decoder_self" or "cross"
    layer: int
    x: torch.Tensor
    values: torch.Tensor
    weights: torch.Tensor
    output: torch.Tensor
    attn: MultiHeadAttention
    norm: nn.LayerNorm  # post-LN: applied to x + MultiHead(...); pre-LN: to the sublayer's input only
    norm_first: bool


def check_model(model) -> None:
    """Contributions need the Transformer's layers of heads; an RNN model's attention is refused."""
    if not getattr(model, "multi_head", False) or not hasattr(model, "encoder_layers"):
        raise InspectError(f"contributions need a Transformer model; this one is {getattr(model, 'arch', '?')}")
    if model.training:
        raise InspectError("the model is in training mode (dropout would change every number); call "
                           "model.eval() first")


def _ffn(layer, x):
    """The position-wise FFN sublayer (§3.3) with its residual and LayerNorm: (B, N, D) -> (B, N, D)."""
    return layer.sublayer_output(x, layer.ffn(layer.sublayer_input(x, layer.ffn_norm)), layer.ffn_norm)


def _encoder(model, src, src_mask, traces):
    x = model._embed(model.src_embed, src)  # (B, S, D)
    for i, layer in enumerate(model.encoder_layers):
        h = layer.sublayer_input(x, layer.self_attn_norm)
        out, weights = layer.self_attn(h, h, h, src_mask, need_weights=True)
        y = layer.sublayer_output(x, out, layer.self_attn_norm)
        traces.append(SublayerTrace("encoder_self", i, x, h, weights, y, layer.self_attn, layer.self_attn_norm,
                                    layer.norm_first))
        x = _ffn(layer, y)
    return model.encoder_norm(x)  # memory (B, S, D)


def _decoder(model, tgt_in, memory, src_mask, traces):
    x = model._embed(model.tgt_embed, tgt_in)  # (B, T, D)
    for i, layer in enumerate(model.decoder_layers):
        h = layer.sublayer_input(x, layer.self_attn_norm)
        out, weights = layer.self_attention(h, need_weights=True)  # weights (B, H, T, T)
        y = layer.sublayer_output(x, out, layer.self_attn_norm)
        traces.append(SublayerTrace("decoder_self", i, x, h, weights, y, layer.self_attn, layer.self_attn_norm,
                                    layer.norm_first))
        h = layer.sublayer_input(y, layer.cross_attn_norm)
        out, weights = layer.cross_attention(h, memory, src_mask, need_weights=True)  # weights (B, H, T, S)
        z = layer.sublayer_output(y, out, layer.cross_attn_norm)
        traces.append(SublayerTrace("cross", i, y, memory, weights, z, layer.cross_attn, layer.cross_attn_norm,
                                    layer.norm_first))
        x = _ffn(layer, z)


@torch.no_grad()
def trace_sublayers(model, src: torch.Tensor, tgt_in: torch.Tensor) -> list[SublayerTrace]:
    """src (B, S), tgt_in (B, T) -> every attention sublayer: the encoder's layers in order, then per decoder
    layer its self-attention and its cross-attention."""
    check_model(model)
    src_mask, traces = padding_mask(src, model.pad_id), []
    memory = _encoder(model, src, src_mask, traces)
    _decoder(model, tgt_in, memory, src_mask, traces)
    return traces

"""One query of one head, step by step (seed 003): scores = q.K^T / sqrt(d_k), weights = softmax(scores),
output = weights . V. Transformer models only: the RNN score functions are not dot products.

The keys are masked as the model masks them (aiayn.model.masks, True = may attend): source padding in
encoder self-attention and cross attention is listed with "mask" False, no score (None) and weight 0;
decoder self-attention lists only the keys up to the query (§3.2.3, the look-ahead mask)."""

import math
from functools import partial

import torch

from aiayn.inspect.capture import InspectError
from aiayn.model.masks import padding_mask


def _layer_input(layer, x):
    return layer.self_attn_norm(x) if layer.norm_first else x


@torch.no_grad()
def _encoder_qkv(model, src, layer_index):
    x, src_mask, found = model._embed(model.src_embed, src), padding_mask(src, model.pad_id), None
    for i, layer in enumerate(model.encoder_layers):
        if i == layer_index:
            found = layer.self_attn.project_qkv(_layer_input(layer, x))
        x, _ = layer(x, src_mask)
    return found, model.encoder_norm(x)


@torch.no_grad()
def _decoder_qkv(model, memory, src, tgt_in, layer_index, kind):
    y, src_mask = model._embed(model.tgt_embed, tgt_in), padding_mask(src, model.pad_id)
    for i, layer in enumerate(model.decoder_layers):
        if i == layer_index and kind == "decoder_self":
            return layer.self_attn.project_qkv(_layer_input(layer, y))
        if i == layer_index:  # cross: the query is the stream after the self-attention sublayer
            y1, _ = layer.residual(y, layer.self_attn_norm, partial(layer._self_attention, cache=None,
                                                                    need_weights=False))
            h = layer.cross_attn_norm(y1) if layer.norm_first else y1
            return (layer.cross_attn.project_q(h), *layer.cross_attn.project_kv(memory, memory))
        y, _, _ = layer(y, memory, src_mask)
    raise AssertionError("layer index checked by the caller")


def attention_step(model, src_ids: list[int], tgt_in_ids: list[int], kind: str, layer: int, head: int,
                   query: int) -> dict:
    if not hasattr(model, "encoder_layers"):
        raise InspectError("the step-by-step view needs a Transformer (RNN scores are not q.K products)")
    n_layers = len(model.encoder_layers if kind == "encoder_self" else model.decoder_layers)
    n_heads = model.encoder_layers[0].self_attn.n_heads
    n_queries = len(src_ids) if kind == "encoder_self" else len(tgt_in_ids)
    for name, value, limit in (("layer", layer, n_layers), ("head", head, n_heads), ("query", query, n_queries)):
        if not 0 <= value < limit:
            raise InspectError(f"{name}={value} out of range [0, {limit})")
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([tgt_in_ids], device=device)
    qkv, memory = _encoder_qkv(model, src, layer if kind == "encoder_self" else -1)
    if kind != "encoder_self":
        qkv = _decoder_qkv(model, memory, src, tgt_in, layer, kind)
    q, k, v = (t[0, head].float() for t in qkv)  # (Q, d_head), (K, d_head), (K, d_head)
    if kind == "decoder_self":  # §3.2.3 no look-ahead: at step `query` only keys 0..query exist (KV cache)
        k, v = k[: query + 1], v[: query + 1]
    mask = _key_mask(kind, src[0], model.pad_id, k.size(0))
    scores = k @ q[query] / math.sqrt(q.size(-1))  # §3.2.1 q.K^T / sqrt(d_k)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    weights = weights.masked_fill(~mask, 0.0)  # every key masked: zeros, not NaN (as in the model)
    output = weights @ v  # weighted sum of V
    return {"d_k": q.size(-1), "query_vector": q[query].tolist(), "mask": mask.tolist(),
            "scores": [s if m else None for s, m in zip(scores.tolist(), mask.tolist())],
            "weights": weights.tolist(), "values": v.tolist(), "output": output.tolist()}


def _key_mask(kind: str, src, pad_id: int, n_keys: int) -> torch.Tensor:
    """(K,) bool, True = may attend: source padding is never attended; decoder self-attention has no
    padding mask in the model (its keys are already cut at the query)."""
    if kind == "decoder_self":
        return torch.ones(n_keys, dtype=torch.bool, device=src.device)
    return src != pad_id

"""One query of one head, step by step: x -> q = x W^Q, K = X W^K, V = X W^V (§3.2.2),
q.k per key, / sqrt(d_k) (§3.2.1), the mask (-inf), softmax, the weighted sum of V. Transformer models;
RNN models have their own step (aiayn.inspect.steps.rnn_step). Beside each weight, the norm of what the key
moves when fully attended, ||f(x_j)|| = ||v_j W^O_h|| (Kobayashi et al. 2020), and the key's share of the
row's value-norm contributions, alpha_j ||f(x_j)|| / sum_k alpha_k ||f(x_k)|| (the page's "contributions"
maps; aiayn.inspect.contributions).

Every key is listed, masked ones too, with the model's mask (aiayn.model.masks, True = may attend):
source padding in encoder self-attention and cross attention, and in decoder self-attention the keys after
the query (§3.2.3, the look-ahead mask). A masked key keeps its raw q.k ("dots") so the page can show
q.k -> -inf -> 0; its "scores" entry is None and its weight 0. Vectors are rounded to DECIMALS places so
an answer's size is bounded: about (2 K d_k + K + d_model + d_k) numbers; the K weights to WEIGHT_DECIMALS,
so that a word's row on the page (the mean of its pieces' rows, keys summed per word) keeps 1e-6."""

import math

import torch

from aiayn.inspect.contributions.decompose import head_value_vectors
from aiayn.inspect.maps.checks import InspectError
from aiayn.model.masks import padding_mask

DECIMALS = 5
WEIGHT_DECIMALS = 8


def _layer_input(layer, x):
    return layer.sublayer_input(x, layer.self_attn_norm)


@torch.no_grad()
def _encoder_qkv(model, src, layer_index):
    """(x of the layer, (q, k, v)) of encoder layer `layer_index` (or None), and the memory."""
    x, src_mask, found = model._embed(model.src_embed, src), padding_mask(src, model.pad_id), None
    for i, layer in enumerate(model.encoder_layers):
        if i == layer_index:
            h = _layer_input(layer, x)
            found = h, layer.self_attn.project_qkv(h)
        x, _ = layer(x, src_mask)
    return found, model.encoder_norm(x)


@torch.no_grad()
def _decoder_qkv(model, memory, src, tgt_in, layer_index, kind):
    y, src_mask = model._embed(model.tgt_embed, tgt_in), padding_mask(src, model.pad_id)
    for i, layer in enumerate(model.decoder_layers):
        if i == layer_index and kind == "decoder_self":
            h = _layer_input(layer, y)
            return h, layer.self_attn.project_qkv(h)
        if i == layer_index:  # cross: the query is the stream after the self-attention sublayer
            y1, _ = layer.residual(y, layer.self_attn_norm, layer.self_attention)
            h = layer.sublayer_input(y1, layer.cross_attn_norm)
            return h, (layer.cross_attn.project_q(h), *layer.cross_attn.project_kv(memory, memory))
        y, _, _ = layer(y, memory, src_mask)
    raise AssertionError("layer index checked by the caller")


def _round(values, decimals: int = DECIMALS) -> list:
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    if isinstance(values, list):
        return [_round(v, decimals) for v in values]
    return None if values is None else round(values, decimals)


def attention_step(model, src_ids: list[int], tgt_in_ids: list[int], kind: str, layer: int, head: int,
                   query: int) -> dict:
    if not model.multi_head:
        raise InspectError("this step-by-step view needs a Transformer; RNN models have their own (rnn_step)")
    n_layers, n_heads = model.attention_shape(kind)
    n_queries = len(src_ids) if kind == "encoder_self" else len(tgt_in_ids)
    for name, value, limit in (("layer", layer, n_layers), ("head", head, n_heads), ("query", query, n_queries)):
        if not 0 <= value < limit:
            raise InspectError(f"{name}={value} out of range [0, {limit})")
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([tgt_in_ids], device=device)
    found, memory = _encoder_qkv(model, src, layer if kind == "encoder_self" else -1)
    x, qkv = found if kind == "encoder_self" else _decoder_qkv(model, memory, src, tgt_in, layer, kind)
    q, k, v = (t[0, head].float() for t in qkv)  # (Q, d_head), (K, d_head), (K, d_head)
    mask = _key_mask(kind, src[0], model.pad_id, k.size(0), query)
    dots = k @ q[query]  # q.k for every key
    scores = dots / math.sqrt(q.size(-1))  # §3.2.1 q.K^T / sqrt(d_k)
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    weights = weights.masked_fill(~mask, 0.0)  # every key masked: zeros, not NaN (as in the model)
    output = weights @ v  # weighted sum of V
    # without the 1/sqrt(d_k) of §3.2.1: softmax(q.k), which saturates as d_k grows (the paper's reason for it)
    unscaled = torch.softmax(dots.masked_fill(~mask, float("-inf")), dim=-1).masked_fill(~mask, 0.0)
    top = scores.masked_fill(~mask, float("-inf")).max()
    exps = torch.exp(scores - top).masked_fill(~mask, 0.0) if mask.any() else torch.zeros_like(scores)
    value_norms = head_value_vectors(_attention(model, kind, layer), v, head).norm(dim=-1)  # ||f(x_j)||: (K,)
    moved = weights * value_norms  # alpha_j ||f(x_j)||: (K,)
    shares = moved / moved.sum().clamp(min=torch.finfo(moved.dtype).tiny)
    return {"arch": "transformer", "kind": kind, "layer": layer, "head": head, "query": query,
            "d_model": x.size(-1), "d_k": q.size(-1), "x_vector": _round(x[0, query].float()),
            "query_vector": _round(q[query]), "keys": _round(k), "values": _round(v), "mask": mask.tolist(),
            "dots": _round(dots), "scores": [s if m else None for s, m in zip(_round(scores), mask.tolist())],
            "max_score": round(float(top), DECIMALS) if mask.any() else None,
            "exps": _round(exps), "exp_sum": round(float(exps.sum()), DECIMALS),
            "weights": _round(weights, WEIGHT_DECIMALS), "unscaled_weights": _round(unscaled), "output": _round(output),
            "value_norms": _round(value_norms), "contributions": _round(shares, WEIGHT_DECIMALS)}


def _attention(model, kind: str, layer: int):
    """The MultiHeadAttention module of a kind and layer."""
    if kind == "encoder_self":
        return model.encoder_layers[layer].self_attn
    block = model.decoder_layers[layer]
    return block.self_attn if kind == "decoder_self" else block.cross_attn


def _key_mask(kind: str, src, pad_id: int, n_keys: int, query: int) -> torch.Tensor:
    """(K,) bool, True = may attend: source padding is never attended; in decoder self-attention the
    keys after the query are the future (§3.2.3)."""
    if kind == "decoder_self":
        return torch.arange(n_keys, device=src.device) <= query
    return src != pad_id

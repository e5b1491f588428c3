"""The rest of one Transformer layer for one query row (§3.1-§3.3), after the head the step view shows:
every head's output for that row, Concat(head_1..head_h) W^O (§3.2.2), the residual and LayerNorm (§3.1:
LayerNorm(x + Sublayer(x)); pre-LN models add first and normalise the next sublayer's input), in a decoder
self-attention layer the cross-attention sublayer, then the position-wise FFN (§3.3) and its residual and
LayerNorm: the layer's output for that row. In the decoder's last layer also the next-token distribution's
top k (the final norm, the output projection and the softmax, §3.4).

Teacher-forced on the given decoder inputs; every number comes from the model's own modules, so the
layer output equals the model's (tests check it within 1e-5). Vectors are rounded to DECIMALS places:
about 10 d_model + d_ff numbers."""

import math

import torch

from aiayn.model.masks import padding_mask

TOP_K = 5  # next tokens listed
DECIMALS = 6  # the page's numbers equal the model's within 1e-5


def _round(values: torch.Tensor) -> list:
    return values.double().round(decimals=DECIMALS).tolist()


@torch.no_grad()
def _streams(model, src, tgt_in):
    """The input of every encoder and decoder layer (each (1, N, D)), the memory and the source mask."""
    src_mask, enc_inputs, dec_inputs = padding_mask(src, model.pad_id), [], []
    x = model._embed(model.src_embed, src)
    for layer in model.encoder_layers:
        enc_inputs.append(x)
        x, _ = layer(x, src_mask)
    memory, y = model.encoder_norm(x), model._embed(model.tgt_embed, tgt_in)
    for layer in model.decoder_layers:
        dec_inputs.append(y)
        y, _, _ = layer(y, memory, src_mask)
    return enc_inputs, dec_inputs, memory, src_mask


def _heads_row(q, k, v, allowed, query):
    """Every head's output for one query row: softmax(q k^T / sqrt(d_k)) V, masked keys -inf. (H, d_head)"""
    scores = (k[0] @ q[0, :, query, :, None])[..., 0] / math.sqrt(q.size(-1))  # (H, K) §3.2.1
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return (weights[:, None, :] @ v[0])[:, 0]  # (H, d_head)


def _sublayer(layer, attn, norm, stream_row, heads):
    """Concat the heads, W^O, then the residual and LayerNorm of layer's sublayer -> its parts."""
    concat = heads.reshape(1, 1, -1)  # (1, 1, D): Concat(head_1..head_h)
    projected = attn.out_proj(concat)  # §3.2.2 Concat(...) W^O
    after = layer.sublayer_output(stream_row, projected, norm)  # §3.1 LayerNorm(x + Sublayer(x))
    return {"heads": heads, "concat": concat[0, 0], "projected": projected[0, 0],
            "residual_sum": (stream_row + projected)[0, 0], "after": after}


def _attention_part(model, kind, layer_index, streams, src_ids, query):
    enc_inputs, dec_inputs, memory, src_mask = streams
    src_allowed = src_mask.reshape(-1)
    if kind == "encoder_self":
        layer, stream = model.encoder_layers[layer_index], enc_inputs[layer_index]
        q, k, v = layer.self_attn.project_qkv(layer.sublayer_input(stream, layer.self_attn_norm))
        return layer, layer.self_attn, layer.self_attn_norm, stream, (q, k, v), src_allowed
    layer, stream = model.decoder_layers[layer_index], dec_inputs[layer_index]
    if kind == "decoder_self":
        q, k, v = layer.self_attn.project_qkv(layer.sublayer_input(stream, layer.self_attn_norm))
        allowed = torch.arange(stream.size(1), device=stream.device) <= query  # §3.2.3 look-ahead mask
        return layer, layer.self_attn, layer.self_attn_norm, stream, (q, k, v), allowed
    stream, _ = layer.residual(stream, layer.self_attn_norm, layer.self_attention)
    h = layer.sublayer_input(stream, layer.cross_attn_norm)
    k, v = layer.cross_attn.project_kv(memory, memory)
    return layer, layer.cross_attn, layer.cross_attn_norm, stream, (layer.cross_attn.project_q(h), k, v), src_allowed


@torch.no_grad()
def layer_step(model, tokenizer, src_ids: list[int], tgt_in_ids: list[int], kind: str, layer: int,
               query: int, *, temperature: float = 1.0) -> dict:
    """The layer's computation for one query row (indices checked by aiayn.inspect.steps.qkv.attention_step);
    temperature: of the next-token distribution (the decoder's last layer)."""
    device = next(model.parameters()).device
    src, tgt_in = torch.tensor([src_ids], device=device), torch.tensor([tgt_in_ids], device=device)
    streams = _streams(model, src, tgt_in)
    mod, attn, norm, stream, (q, k, v), allowed = _attention_part(model, kind, layer, streams, src_ids, query)
    parts = _sublayer(mod, attn, norm, stream[:, query:query + 1], _heads_row(q, k, v, allowed, query))
    after = parts.pop("after")
    row, cross = after, None
    if kind == "decoder_self":  # the cross-attention sublayer comes between this one and the FFN
        memory, src_mask = streams[2], streams[3]
        row, _ = mod.residual(row, mod.cross_attn_norm, lambda h: mod.cross_attention(h, memory, src_mask))
        cross = row[0, 0]
    ffn_in = mod.sublayer_input(row, mod.ffn_norm)
    hidden = mod.ffn.activation(mod.ffn.w_1(ffn_in))  # §3.3 max(0, x W1 + b1)
    ffn_out = mod.ffn.w_2(hidden)  # §3.3 (...) W2 + b2
    out = mod.sublayer_output(row, ffn_out, mod.ffn_norm)
    answer = {"norm_first": bool(mod.norm_first), "n_heads": attn.n_heads, "d_ff": hidden.size(-1),
              **{name: _round(value.float()) for name, value in parts.items()},
              "after_attention": _round(after[0, 0].float()),
              "after_cross": None if cross is None else _round(cross.float()),
              "ffn_input": _round(ffn_in[0, 0].float()), "ffn_hidden": _round(hidden[0, 0].float()),
              "ffn_output": _round(ffn_out[0, 0].float()), "layer_output": _round(out[0, 0].float()),
              "last_decoder_layer": kind != "encoder_self" and layer == len(model.decoder_layers) - 1}
    if answer["last_decoder_layer"]:
        answer["next_tokens"] = next_tokens(model, tokenizer, out, temperature=temperature)
        answer["temperature"] = temperature
    return answer


def next_tokens(model, tokenizer, out, k: int = TOP_K, temperature: float = 1.0) -> list[dict]:
    """The top k of softmax(W_out · norm(x) / T) for the decoder's last layer output row `out` (1, 1, D): T = 1
    is the model's distribution, the one beam search reads; sampling's --temperature divides as here."""
    probs = torch.softmax(model.generator(model.decoder_norm(out)).float()[0, 0] / temperature, dim=-1)
    top = probs.topk(min(k, probs.numel()))
    return [{"token": piece, "id": int(i), "prob": round(float(p), 6)}
            for piece, i, p in zip(tokenizer.id_to_piece(top.indices.tolist()), top.indices.tolist(), top.values)]

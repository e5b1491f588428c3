"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2)."""

import math

import torch
from torch import nn

from aiayn.model.decoder_state import LayerCache
from aiayn.model.masks import check_mask


def _explicit_attention(q, k, v, mask, dropout_p, is_causal, training):
    # q (..., T, d_k), k (..., S, d_k), v (..., S, d_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # §3.2.1 QK^T / sqrt(d_k): (..., T, S)
    if is_causal:
        causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        mask = causal if mask is None else mask & causal
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # §3.2.1 softmax(.), in at least fp32 even under bf16 autocast
    weights = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(q.dtype)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # fully masked row -> 0
    dropped = nn.functional.dropout(weights, dropout_p, training) if dropout_p > 0 else weights
    return dropped @ v, weights  # §3.2.1 (.)V


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
    is_causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention(Q, K, V) = softmax(QK^T / sqrt(d_k)) V   (§3.2.1, eq. 1)

    q (B, H, T, d_k), k (B, H, S, d_k), v (B, H, S, d_v); mask bool broadcastable to (B, H, T, S),
    True = may attend; `is_causal` adds the decoder's look-ahead mask. Returns (out (B, H, T, d_v),
    weights (B, H, T, S) or None). Without `need_weights` torch's fused kernel runs (except under bf16
    on CPU); with it, the explicit formula; both give the same numbers. dropout_p applies to the weights
    (training only)."""
    if mask is not None:
        check_mask(mask, q.size(0) if q.dim() == 4 else 1, q.size(-2), k.size(-2))
    if need_weights:
        return _explicit_attention(q, k, v, mask, dropout_p, is_causal, training=dropout_p > 0)
    if q.device.type == "cpu" and (q.dtype == torch.bfloat16 or torch.is_autocast_enabled("cpu")):
        # bf16 on CPU: torch's flash-attention kernel is slow here, in bf16 (3.4x its fp32 time) and in fp32
        # at short lengths (Multi30k's ~20 tokens: 3x the explicit formula below, forward + backward,
        # measured in BENCHMARKS.md). The explicit formula runs QK^T and (.)V in bf16, the softmax in fp32.
        out, _ = _explicit_attention(q, k, v, mask, dropout_p, is_causal, training=dropout_p > 0)
        return out, None
    empty_rows = None
    if mask is not None:
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # (B, 1|H, T|1, 1) rows with nothing to attend
        if is_causal:
            causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
            mask, is_causal = mask & causal, False
        # Let empty rows attend everywhere so the kernel stays finite; their output is zeroed below.
        mask = mask | empty_rows
    out = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                     is_causal=is_causal)
    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)
    return out, None


class InProjection(nn.Linear):
    """[W^Q; W^K; W^V] stacked by rows, (3D, D), as torch stores them: calling it projects an input to Q, K
    and V with one matmul (self-attention); `blocks` projects by some of the three only (cross-attention's
    queries by W^Q, its memory by [W^K; W^V])."""

    def blocks(self, x: torch.Tensor, first: int, last: int) -> torch.Tensor:
        """x (..., D) -> (..., (last - first) D) by blocks first..last-1 (0: W^Q, 1: W^K, 2: W^V)."""
        rows = slice(first * self.in_features, last * self.in_features)
        bias = None if self.bias is None else self.bias[rows]
        return nn.functional.linear(x, self.weight[rows], bias)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    (§3.2.2). W^Q, W^K, W^V are stored stacked in `in_proj` (an InProjection), so self-attention projects
    with one matmul; d_head = d_model / n_heads."""

    # The dtype decoding keeps the self-attention K/V cache in (None: as projected). Beam search copies the
    # cache at every step (rows reordered); in bfloat16 that copy is half the bytes (aiayn.cpu's
    # low-precision compute types set it: their K/V are bfloat16 products already, or int8 ones).
    cache_dtype: torch.dtype | None = None

    def __init__(self, *, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.in_proj = InProjection(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, D) -> (B, H, T, d_head)
        return x.unflatten(-1, (self.n_heads, self.d_head)).transpose(1, 2)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention: x (B, T, D) -> q, k, v each (B, H, T, d_head), one matmul."""
        return tuple(self._split_heads(t) for t in self.in_proj(x).chunk(3, dim=-1))

    def project_q(self, x: torch.Tensor) -> torch.Tensor:
        return self._split_heads(self.in_proj.blocks(x, 0, 1))

    def project_kv(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if key is value:  # cross-attention: memory projected to K and V with one matmul
            k, v = self.in_proj.blocks(key, 1, 3).chunk(2, dim=-1)
        else:
            k, v = self.in_proj.blocks(key, 1, 2), self.in_proj.blocks(value, 2, 3)
        return self._split_heads(k), self._split_heads(v)

    def attend(self, q, k, v, mask=None, need_weights=False, is_causal=False):
        """q (B, H, T, d_head), k/v (B, H, S, d_head) -> (out (B, T, D), weights (B, H, T, S) | None)."""
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p, need_weights, is_causal)
        out = self.out_proj(heads.transpose(1, 2).flatten(2))  # Concat(head_1..h) W^O: (B, T, D)
        return out, weights

    def step_self(self, x, cache: LayerCache, need_weights=False):
        """One decoding position of self-attention: x (R, D) -> (out (R, D), weights (R, H, 1, t + 1) | None).
        Q, K, V come from one product, (R, 3, H, d_head) views of it; K and V are appended to the cache and
        the position attends every cached one (nothing later exists yet, so no look-ahead mask)."""
        R, H, d = x.size(0), self.n_heads, self.d_head
        qkv = self.in_proj(x).view(R, 3, H, d)
        kv = qkv[:, 1:] if self.cache_dtype is None else qkv[:, 1:].to(self.cache_dtype)
        k, v = cache.append_self(kv)  # each (R, H, t + 1, d_head)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(qkv[:, 0, :, None].to(k.dtype), k, v, None, dropout_p,
                                                      need_weights)
        weights = None if weights is None else weights.to(x.dtype)
        return self.out_proj(heads.reshape(R, H * d).to(x.dtype)), weights  # heads (R, H, 1, d_head)

    def step_cross(self, x, k, v, mask, need_weights=False):
        """One decoding step of cross-attention: x (R, D) for R = B' x G rows, the G rows (beams) of a
        sentence side by side; k/v (B', H, S, d_head) and mask (B', 1, 1, S) stored once per sentence. A
        sentence's G queries attend its keys as one (G, S) product, so the K/V are neither copied per beam
        nor re-selected when beams are reordered. -> (out (R, D), weights (R, H, 1, S) | None)."""
        R, B, H, d = x.size(0), k.size(0), self.n_heads, self.d_head
        q = self.in_proj.blocks(x, 0, 1).view(B, R // B, H, d).transpose(1, 2)  # (B', H, G, d_head)
        if need_weights:
            heads, weights = scaled_dot_product_attention(q, k, v, mask, 0.0, True)  # (B', H, G, d_head)
            weights = weights.transpose(1, 2).reshape(R, H, 1, weights.size(-1))  # (B', H, G, S) -> (R, H, 1, S)
        else:  # torch's kernel directly: a source always has a token (</s>), so no row is fully masked
            heads, weights = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), None
        return self.out_proj(heads.transpose(1, 2).reshape(R, H * d)), weights

    def forward(self, query, key, value, mask=None, need_weights=False, is_causal=False):
        """query (B, T, D), key/value (B, S, D), mask broadcastable to (B, H, T, S) (True = may attend)."""
        if query is key and key is value:
            q, k, v = self.project_qkv(query)
        else:
            q = self.project_q(query)
            k, v = self.project_kv(key, value)
        return self.attend(q, k, v, mask, need_weights, is_causal)

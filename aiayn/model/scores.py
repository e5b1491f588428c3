"""Attention score functions of the posts' table, for one decoder query against all encoder states.

Notation: s = decoder state (the query), h_i = encoder state i (the keys), n = their size.
Every module maps query (B, Dq) and keys (B, S, Dk) to scores (B, S). `prepare_keys` computes the
key-side part once per sentence (the RNN decoders cache it); `forward(q, k) == score(q, prepare_keys(k))`.
The attention distribution is softmax over unmasked positions; the context vector is the weighted sum.
"""

import math

import torch
from torch import nn


class ScoreFunction(nn.Module):
    """Base: `prepare_keys` defaults to the keys themselves."""

    def prepare_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        return self.score(query, self.prepare_keys(keys))


def _dot(query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    # (B, Dq) . (B, S, Dq) -> (B, S)
    return torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1)


class DotScore(ScoreFunction):
    """dot (Luong 2015): score(s, h_i) = s^T h_i"""

    def score(self, query, prepared):
        return _dot(query, prepared)


class ScaledDotScore(ScoreFunction):
    """scaled dot (Vaswani 2017): score(s, h_i) = s^T h_i / sqrt(n)"""

    def __init__(self, *, dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(dim)

    def score(self, query, prepared):
        return _dot(query, prepared) * self.scale


class GeneralScore(ScoreFunction):
    """general (Luong 2015): score(s, h_i) = s^T W_a h_i; W_a h_i is computed once per sentence."""

    def __init__(self, *, query_dim: int, key_dim: int):
        super().__init__()
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def prepare_keys(self, keys):
        return self.W_a(keys)  # (B, S, Dq)

    def score(self, query, prepared):
        return _dot(query, prepared)


class _TanhEnergy(torch.autograd.Function):
    """e_i = v^T tanh(q + k_i), the energy of the concat and additive scores: q (B, A), k (B, S, A), v (1, A) ->
    (B, S). Autograd would keep the (B, S, A) tanh for the backward pass; this keeps only q, k and v (k is the
    same prepared keys at every step) and computes the tanh again there. Teacher forcing keeps one per target
    step: T x B x S x A in all, ~150 MB in bf16 for a 3000-token batch of 100-token sentences at A = 256, one of
    the two largest parts of Bahdanau training's peak memory. The backward makes autograd's own calls on the tanh."""

    @staticmethod
    def forward(ctx, q, k, v):
        ctx.save_for_backward(q, k, v)
        return nn.functional.linear(torch.tanh(q.unsqueeze(1) + k), v).squeeze(-1)  # (B, S, 1) -> (B, S)

    @staticmethod
    def backward(ctx, grad_e):  # grad_e: (B, S)
        q, k, v = ctx.saved_tensors
        t = torch.tanh(q.unsqueeze(1) + k)  # (B, S, A), as in forward (under autocast: in its dtype)
        v = v.to(t.dtype)  # the copy forward's linear used under autocast
        grad_e = grad_e.to(t.dtype)
        grad_z = torch.ops.aten.tanh_backward(grad_e.unsqueeze(-1) @ v, t)  # d/d(q + k_i) = grad_t (1 - t^2)
        grad_v = grad_e.reshape(1, -1) @ t.reshape(-1, t.size(-1))  # (1, B*S) @ (B*S, A), linear's weight grad
        return grad_z.sum(1), grad_z, grad_v  # q was broadcast over the S keys: its grad sums over them


def tanh_energy(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v^T tanh(q + k_i) for q (B, A), k (B, S, A), v (1, A) -> (B, S); see _TanhEnergy."""
    return _TanhEnergy.apply(q, k, v)


class ConcatScore(ScoreFunction):
    """concat (Luong 2015): score(s, h_i) = v_a^T tanh(W_a [s; h_i]).
    W_a [s; h] is split as W_s s + W_h h (the same linear map), so W_h h is computed once."""

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int):
        super().__init__()
        self.W_a = nn.Linear(query_dim + key_dim, attention_dim, bias=False)
        self.v_a = nn.Linear(attention_dim, 1, bias=False)
        self.query_dim = query_dim

    def prepare_keys(self, keys):
        return nn.functional.linear(keys, self.W_a.weight[:, self.query_dim :])  # W_h h: (B, S, A)

    def score(self, query, prepared):
        query_part = nn.functional.linear(query, self.W_a.weight[:, : self.query_dim])  # W_s s: (B, A)
        return tanh_energy(query_part, prepared, self.v_a.weight)  # v_a^T tanh(W_s s + W_h h_i)


class AdditiveScore(ScoreFunction):
    """additive (Bahdanau 2015): score(s, h_i) = v_a^T tanh(W_1 s + W_2 h_i)"""

    def __init__(self, *, query_dim: int, key_dim: int, attention_dim: int):
        super().__init__()
        self.W_1 = nn.Linear(query_dim, attention_dim, bias=False)
        self.W_2 = nn.Linear(key_dim, attention_dim, bias=True)
        self.v_a = nn.Linear(attention_dim, 1, bias=False)

    def prepare_keys(self, keys):
        return self.W_2(keys)  # (B, S, A)

    def score(self, query, prepared):
        return tanh_energy(self.W_1(query), prepared, self.v_a.weight)  # v_a^T tanh(W_1 s + W_2 h_i)


class CosineScore(ScoreFunction):
    """content-based (Graves 2014): score(s, h_i) = cosine[s, h_i] = s.h_i / (|s| |h_i|)"""

    def __init__(self, *, eps: float = 1e-8):
        super().__init__()
        self.eps = eps

    def prepare_keys(self, keys):
        return keys / keys.norm(dim=-1, keepdim=True).clamp_min(self.eps)

    def score(self, query, prepared):
        unit_query = query / query.norm(dim=-1, keepdim=True).clamp_min(self.eps)
        return _dot(unit_query, prepared)


class LocationScore(ScoreFunction):
    """location-based (Luong 2015): a_t = softmax(W_a s_t); the scores depend only on the query.
    W_a maps the query to `max_source_len` positions; the first S are used."""

    def __init__(self, *, query_dim: int, max_source_len: int):
        super().__init__()
        self.W_a = nn.Linear(query_dim, max_source_len)

    def score(self, query, prepared):
        n_keys = prepared.size(1)
        if n_keys > self.W_a.out_features:
            raise ValueError(f"source of {n_keys} positions exceeds location score max_source_len "
                             f"{self.W_a.out_features}; raise max_len in the model config")
        return self.W_a(query)[:, :n_keys]


def attention_distribution(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """alpha = softmax(e) over unmasked positions (mask True = may attend). A row with no unmasked
    position gets all zeros instead of NaN. scores (..., S), mask broadcastable to it."""
    if mask is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def context_vector(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """a_t = sum_i alpha_i h_i: weights (B, S), values (B, S, D) -> (B, D)."""
    return torch.bmm(weights.unsqueeze(1), values).squeeze(1)

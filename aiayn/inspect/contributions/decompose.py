"""One attention sublayer taken apart by input token.

Value-norm maps (Kobayashi et al. 2020, "Attention is not only a weight"): head h moves alpha^h_ij f_h(x_j)
from key j to query i, where f_h(x_j) = (x_j W^V_h + b^V_h) W^O_h is key j's value vector through the head's
slice of the output projection (the bias b^O excluded: it belongs to no token). The map per head is
||alpha^h_ij f_h(x_j)||; summed over heads it is ||sum_h alpha^h_ij f_h(x_j)||, the norm of what all
heads together move (the vectors are summed, then measured, as in the paper).

ALTI+ (Ferrando et al. 2022): the sublayer's output is a sum over tokens, y_i = sum_j T_i(x_j) + bias_i.
Post-LN (§3.1, y = LayerNorm(x + MultiHead(x))) the LayerNorm is applied linearly around the mean and
standard deviation of the actual sum z_i = x_i + MultiHead(x)_i:
    T_i(x_j) = gamma * (t_ij - mean(t_ij)) / sigma_i,   t_ij = sum_h alpha^h_ij f_h(x_j) (+ x_i when j = i),
    bias_i   = gamma * (b^O - mean(b^O)) / sigma_i + beta,   sigma_i = sqrt(var(z_i) + eps),
which sums exactly to LayerNorm(z_i) because centring is linear. Pre-LN (y = x + MultiHead(LayerNorm(x)))
needs no linearisation: LayerNorm(x_j) depends on token j alone, so T_i(x_j) = t_ij and bias_i = b^O.
The contribution of token j to y_i is c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), normalised per row.
"""

from dataclasses import dataclass

import torch

from aiayn.inspect.contributions.trace import SublayerTrace


@dataclass
class Decomposition:
    """y_i = sum_j terms[i, j] + residual[i] + bias[i] (equals output to float tolerance).

    terms     (B, Q, K, D) T_i(x_j) of the attention's keys, without the residual
    residual  (B, Q, D) T_i(x_i) of the residual stream alone (the query's own token)
    bias      (B, Q, D) what no token owns: b^O (and beta post-LN)
    output    (B, Q, D) the sublayer's actual output y
    """

    terms: torch.Tensor
    residual: torch.Tensor
    bias: torch.Tensor
    output: torch.Tensor


def head_values(trace: SublayerTrace) -> torch.Tensor:
    """f_h(x_j) = (x_j W^V_h + b^V_h) W^O_h for every head and key: (B, H, K, D), in float32 or wider."""
    attn = trace.attn
    H, d_head = attn.n_heads, attn.d_head
    dtype = torch.promote_types(trace.values.dtype, torch.float32)
    v = attn.in_proj.blocks(trace.values, 2, 3).to(dtype)  # §3.2.2 x W^V + b^V: (B, K, D)
    v = v.unflatten(-1, (H, d_head)).transpose(1, 2)  # (B, H, K, d_head)
    w_o = attn.out_proj.weight.to(dtype).unflatten(1, (H, d_head))  # W^O stored (D, D) out x in -> (D, H, d_head)
    return torch.einsum("bhkc,ehc->bhke", v, w_o)  # (B, H, K, D)


def head_value_vectors(attn, v: torch.Tensor, head: int) -> torch.Tensor:
    """One head's values v_j = x_j W^V_h + b^V_h (..., K, d_head) -> f_h(x_j) = v_j W^O_h (..., K, D), through
    the head's slice of the output projection (b^O excluded), as head_values computes them for every head."""
    d_head = attn.d_head
    w_o = attn.out_proj.weight[:, head * d_head:(head + 1) * d_head]  # W^O stored (D, D) out x in -> (D, d_head)
    return v @ w_o.to(v.dtype).T


def value_norm_maps(trace: SublayerTrace) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (per head ||alpha^h_ij f_h(x_j)|| (B, H, Q, K), summed over heads ||sum_h alpha^h_ij f_h(x_j)||
    (B, Q, K))."""
    f = head_values(trace)  # (B, H, K, D)
    alpha = trace.weights.to(f.dtype)  # (B, H, Q, K)
    per_head = alpha * f.norm(dim=-1)[:, :, None, :]  # (B, H, Q, K)
    moved = torch.einsum("bhqk,bhke->bqke", alpha, f)  # sum_h alpha^h_ij f_h(x_j): (B, Q, K, D)
    return per_head, moved.norm(dim=-1)


def _centre(v: torch.Tensor) -> torch.Tensor:
    return v - v.mean(dim=-1, keepdim=True)


def decompose(trace: SublayerTrace) -> Decomposition:
    """The sublayer's output split by input token (see the module's docstring)."""
    f = head_values(trace)  # (B, H, K, D)
    dtype = f.dtype
    t = torch.einsum("bhqk,bhke->bqke", trace.weights.to(dtype), f)  # (B, Q, K, D)
    x = trace.x.to(dtype)  # (B, Q, D)
    b_o = trace.attn.out_proj.bias
    b_o = torch.zeros_like(x[0, 0]) if b_o is None else b_o.to(dtype)  # (D,)
    if trace.norm_first:  # y = x + MultiHead(LayerNorm(x)): already a sum over tokens
        return Decomposition(t, x, b_o.expand_as(x), trace.output.to(dtype))
    z = x + t.sum(dim=2) + b_o  # x + MultiHead(x): (B, Q, D)
    sigma = (z.var(dim=-1, unbiased=False, keepdim=True) + trace.norm.eps).sqrt()  # (B, Q, 1)
    gamma = trace.norm.weight.to(dtype)
    beta = trace.norm.bias.to(dtype)
    terms = gamma * _centre(t) / sigma[:, :, None]  # (B, Q, K, D)
    residual = gamma * _centre(x) / sigma
    bias = gamma * _centre(b_o) / sigma + beta
    return Decomposition(terms, residual, bias, trace.output.to(dtype))


def token_vectors(parts: Decomposition, self_attention: bool) -> torch.Tensor:
    """T_i(x_j) per input token. Self-attention: the residual joins its own key (j = i), (B, Q, Q, D).
    Cross-attention: the keys are source tokens and the residual is the target token itself, appended as a
    last column, (B, T, S + 1, D)."""
    if self_attention:
        Q = parts.terms.size(1)
        eye = torch.eye(Q, dtype=parts.terms.dtype, device=parts.terms.device)  # (Q, Q)
        return parts.terms + eye[None, :, :, None] * parts.residual[:, :, None, :]
    return torch.cat([parts.terms, parts.residual[:, :, None, :]], dim=2)


def alti_contributions(parts: Decomposition, self_attention: bool) -> torch.Tensor:
    """c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), each row normalised to sum to 1 (Ferrando et al.
    2022, eq. 5-6); y_i is the sublayer's actual output. (B, Q, Q) or, cross-attention, (B, T, S + 1)."""
    vectors = token_vectors(parts, self_attention)  # (B, Q, K', D)
    y = parts.output[:, :, None, :]  # (B, Q, 1, D)
    c = (y.abs().sum(-1) - (y - vectors).abs().sum(-1)).clamp(min=0)  # (B, Q, K')
    return c / c.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(c.dtype).tiny)

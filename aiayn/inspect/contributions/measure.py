"""Contributions of every attention kind and layer of a Transformer, for a teacher-forced batch.

Shapes: B batch, L layers, H heads, S source, T target (decoder inputs <s> y_1 .. y_{T-1}); Q queries and K
keys of a kind: encoder_self (S, S), decoder_self (T, T), cross (T, S).
"""

from dataclasses import dataclass

import torch

from aiayn.inspect.contributions.decompose import alti_contributions, decompose, value_norm_maps
from aiayn.inspect.contributions.rollout import decoder_rollout, encoder_rollout, source_share
from aiayn.inspect.contributions.trace import trace_sublayers


@dataclass
class Contributions:
    """value_norms[kind]         (B, L, H, Q, K) ||alpha^h_ij f_h(x_j)|| per head (Kobayashi et al. 2020)
    value_norms_summed[kind]     (B, L, Q, K) ||sum_h alpha^h_ij f_h(x_j)||
    alti[kind]                   (B, L, Q, K') ALTI+ contributions through the sublayer (attention, residual,
                                 LayerNorm), rows sum to 1; K' = K for self-attention (the residual is in
                                 the query's own column), K' = S + 1 for cross (last column: the target
                                 token's own residual)
    encoder_rollout              (B, S, S) source tokens' shares of each encoder output
    decoder_rollout              (B, T, S + T) source and target-prefix tokens' shares of each decoder output
    source_share, prefix_share   (B, T) per output token, summing to 1
    """

    value_norms: dict[str, torch.Tensor]
    value_norms_summed: dict[str, torch.Tensor]
    alti: dict[str, torch.Tensor]
    encoder_rollout: torch.Tensor
    decoder_rollout: torch.Tensor
    source_share: torch.Tensor
    prefix_share: torch.Tensor


def measure_contributions(model, src: torch.Tensor, tgt_in: torch.Tensor) -> Contributions:
    """src (B, S), tgt_in (B, T) -> every kind and layer's value-norm maps and ALTI+ contributions, and the
    source vs target-prefix share of every output token. Post-LN (the paper's) and pre-LN models both: see
    aiayn.inspect.contributions.decompose. An RNN model, or one in training mode, is refused."""
    per_kind = {kind: ([], [], []) for kind in model.attention_kinds}
    with torch.no_grad():
        for trace in trace_sublayers(model, src, tgt_in):
            per_head, summed = value_norm_maps(trace)
            norms, sums, alti = per_kind[trace.kind]
            norms.append(per_head)
            sums.append(summed)
            alti.append(alti_contributions(decompose(trace), trace.kind != "cross"))
        enc = encoder_rollout(per_kind["encoder_self"][2])
        dec = decoder_rollout(per_kind["decoder_self"][2], per_kind["cross"][2], enc)
    from_src, from_tgt = source_share(dec, src.size(1))
    stack = {i: {kind: torch.stack(lists[i], dim=1) for kind, lists in per_kind.items()} for i in range(3)}
    return Contributions(stack[0], stack[1], stack[2], enc, dec, from_src, from_tgt)

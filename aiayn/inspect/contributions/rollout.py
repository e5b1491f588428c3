"""Per-layer ALTI+ contributions combined across layers (the rollout of Ferrando et al. 2022, ALTI+).

Each per-layer matrix says how much of a token's vector after an attention sublayer comes from each token
before it; rows sum to 1. The FFN sublayer works on each token alone, so, as in ALTI, it moves nothing
between tokens and is left out. Shapes: B batch, S source, T target.

Encoder: R_enc = A_L ... A_2 A_1, A_l the encoder self-attention contributions of layer l (B, S, S):
how much of each encoder output (the memory) comes from each source token.

Decoder: R (B, T, S + T) says how much of each target position's stream comes from each source token (the
first S columns, through the memory) and from each target-prefix token (the decoder inputs <s> y_1 ..;
the last T columns). It starts as [0 | I]. Decoder layer l has self-attention contributions A_l (B, T, T)
and cross-attention contributions C_l (B, T, S + 1), whose last column c_l is the target token's own share
(the residual) and the rest C^src_l its source share. The stream after the layer is then
    R_l = [ C^src_l R_enc + diag(c_l) A_l R^src_{l-1}  |  diag(c_l) A_l R^tgt_{l-1} ].
The source share of output token i is the sum of its first S columns; the prefix share the rest; the two
add to 1 when every row does.
"""

import torch


def encoder_rollout(layers: list[torch.Tensor]) -> torch.Tensor:
    """[A_1 .. A_L], each (B, S, S) -> R_enc = A_L ... A_1 (B, S, S)."""
    rollout = torch.eye(layers[0].size(-1), dtype=layers[0].dtype, device=layers[0].device).expand_as(layers[0])
    for a in layers:
        rollout = a @ rollout
    return rollout


def decoder_rollout(self_layers: list[torch.Tensor], cross_layers: list[torch.Tensor],
                    enc_rollout: torch.Tensor) -> torch.Tensor:
    """[A_l] (B, T, T), [C_l] (B, T, S + 1), R_enc (B, S, S) -> R_L (B, T, S + T) (see the module's
    docstring)."""
    B, T, S = cross_layers[0].size(0), cross_layers[0].size(1), enc_rollout.size(-1)
    like = dict(dtype=enc_rollout.dtype, device=enc_rollout.device)
    from_src = torch.zeros(B, T, S, **like)  # R^src (B, T, S)
    from_tgt = torch.eye(T, **like).expand(B, T, T)  # R^tgt (B, T, T)
    for a, c in zip(self_layers, cross_layers):
        own = c[..., S:]  # c_l (B, T, 1): the target token's residual
        from_src = c[..., :S] @ enc_rollout + own * (a @ from_src)
        from_tgt = own * (a @ from_tgt)
    return torch.cat([from_src, from_tgt], dim=-1)


def source_share(rollout: torch.Tensor, n_source: int) -> tuple[torch.Tensor, torch.Tensor]:
    """R_L (B, T, S + T) -> (source share (B, T), target-prefix share (B, T))."""
    return rollout[..., :n_source].sum(-1), rollout[..., n_source:].sum(-1)

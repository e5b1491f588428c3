"""The ALTI+ rollout (aiayn.inspect.contributions.rollout) is the one of Ferrando et al. 2022: equal to
their recurrence written out here (each layer's joint matrix [cross-attention's source columns times the
encoder rollout | the self-attention rows scaled by the residual's share], multiplied down the layers), a
hand-made case gives the shares it must, and every output token's shares sum to 1."""

import torch

from aiayn.inspect.contributions.rollout import decoder_rollout, encoder_rollout, source_share


def _rows(*shape, seed=0):
    """Random row-stochastic matrices (..., Q, K), causal where Q == K (a decoder's self-attention)."""
    x = torch.rand(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    if shape[-1] == shape[-2]:
        x = x.tril()
    return x / x.sum(-1, keepdim=True)


def _paper_rollout(self_layers, cross_layers, enc):
    """Ferrando et al.'s recurrence for one sentence: joint_l = [C^src_l R_enc | diag(c_l) A_l], then
    R_l = [joint_l^tgt R_{l-1}^src + joint_l^src | joint_l^tgt R_{l-1}^tgt]."""
    S = enc.size(-1)
    joint = [torch.cat([c[:, :S] @ enc, c[:, S:] * a], dim=-1) for a, c in zip(self_layers, cross_layers)]
    rolled = joint[0]
    for j in joint[1:]:
        rolled = torch.cat([j[:, S:] @ rolled[:, :S] + j[:, :S], j[:, S:] @ rolled[:, S:]], dim=-1)
    return rolled


def test_rollout_equals_the_papers_recurrence():
    S, T, L = 5, 4, 3
    enc_layers = [_rows(S, S, seed=i) for i in range(L)]
    self_layers = [_rows(T, T, seed=10 + i) for i in range(L)]
    cross_layers = [_rows(T, S + 1, seed=20 + i) for i in range(L)]
    enc = encoder_rollout([a[None] for a in enc_layers])[0]
    torch.testing.assert_close(enc, enc_layers[2] @ enc_layers[1] @ enc_layers[0])
    ours = decoder_rollout([a[None] for a in self_layers], [c[None] for c in cross_layers], enc[None])[0]
    torch.testing.assert_close(ours, _paper_rollout(self_layers, cross_layers, enc))
    from_src, from_tgt = source_share(ours[None], S)
    torch.testing.assert_close(from_src + from_tgt, torch.ones(1, T, dtype=torch.float64), atol=1e-5, rtol=0)


def test_identity_self_attention_leaves_one_minus_the_product_of_residual_shares():
    """Self-attention that keeps each token (A_l = I) and cross-attention that keeps a share c_l of the
    target token: the source's share after L layers is 1 - c_1 c_2 ... c_L, spread as the cross rows say."""
    S, T = 3, 2
    own = [0.5, 0.8, 0.25]  # c_l, the same for every target token
    src_part = torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)  # how the source share spreads
    cross = [torch.cat([(1 - c) * src_part, torch.tensor([c], dtype=torch.float64)]).expand(T, S + 1)[None]
             for c in own]
    eye = torch.eye(T, dtype=torch.float64)[None]
    rolled = decoder_rollout([eye] * 3, cross, torch.eye(S, dtype=torch.float64)[None])[0]
    expected = 1 - 0.5 * 0.8 * 0.25
    torch.testing.assert_close(rolled[:, :S].sum(-1), torch.full((T,), expected, dtype=torch.float64))
    torch.testing.assert_close(rolled[:, :S], (expected * src_part).expand(T, S))
    torch.testing.assert_close(rolled[:, S:], (1 - expected) * eye[0])  # the rest: each token's own

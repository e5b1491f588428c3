"""A beam wider than the candidate search's blocks: top_candidates ranks only the n blocks with the highest
maxima, so at a step of few rows (the first: one per sentence) a beam over half the blocks (beam 40 on a
10,000-piece vocabulary: 79 blocks) had too few to pick from ("selected index k out of range")."""

import torch

from aiayn.decoding.beam import BLOCK, eager_candidates, top_candidates


def test_more_candidates_than_blocks_ranks_every_sum():
    torch.manual_seed(0)
    B, G, V = 2, 1, 16 * BLOCK  # 16 blocks a row
    log_probs, scores = torch.randn(B, G, V).log_softmax(-1), torch.randn(B, G)
    values, origin, token = eager_candidates(log_probs, scores, 40)
    want = (scores[:, :, None] + log_probs).view(B, G * V).topk(40, dim=1)
    assert torch.equal(values, want.values)
    assert torch.equal(origin * V + token, want.indices)


def test_where_the_blocks_suffice_it_is_the_block_search():
    torch.manual_seed(1)
    B, G, V = 2, 4, 16 * BLOCK + 5
    log_probs, scores = torch.randn(B, G, V).log_softmax(-1), torch.randn(B, G)
    got, want = eager_candidates(log_probs, scores, 8), top_candidates(log_probs, scores, 8)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    full = (scores[:, :, None] + log_probs).view(B, G * V).topk(8, dim=1)
    assert torch.equal(got[0], full.values)

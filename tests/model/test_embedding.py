import math

import torch

from aiayn.model import SinusoidalPositionalEncoding, TokenEmbedding
from aiayn.model.embedding import sinusoid_table


def test_positional_encoding_matches_formula_at_known_positions():
    table = sinusoid_table(100, 16)
    for pos in (0, 1, 7, 50):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)
    assert table[0, 0::2].abs().max() == 0 and torch.all(table[0, 1::2] == 1)


def test_dot_product_of_positions_depends_only_on_offset():
    table = sinusoid_table(200, 32).double()
    for k in (1, 5, 20):
        dots = torch.stack([table[t] @ table[t + k] for t in range(0, 150, 7)])
        torch.testing.assert_close(dots, dots[:1].expand_as(dots))


def test_positional_offset_and_embedding_scale():
    pe = SinusoidalPositionalEncoding(d_model=8, max_len=20)
    x = torch.zeros(1, 3, 8)
    torch.testing.assert_close(pe(x, offset=4)[0], sinusoid_table(20, 8)[4:7])
    emb = TokenEmbedding(vocab_size=10, d_model=16, pad_id=0)
    tokens = torch.tensor([[3]])
    torch.testing.assert_close(emb(tokens)[0, 0], emb.weight[3] * 4.0)


def test_both_position_kinds_offer_their_table():
    """Decoding (the longest input), the compiled decoder, the CTranslate2 export and the explorer read
    positional.table (max_len, D) whatever the kind."""
    from aiayn.model import LearnedPositionalEmbedding

    for pe in (SinusoidalPositionalEncoding(d_model=8, max_len=20), LearnedPositionalEmbedding(d_model=8, max_len=20)):
        assert pe.table.shape == (20, 8)
        torch.testing.assert_close(pe(torch.zeros(1, 3, 8), offset=2)[0], pe.table[2:5])
    assert not hasattr(TokenEmbedding(vocab_size=10, d_model=8, pad_id=0), "table")

import math

import pytest
import torch

from aiayn.model import (
    AdditiveScore,
    ConcatScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
    attention_distribution,
    context_vector,
)

# one query s (B=1, n=2) and three encoder states h_1..h_3 (S=3, n=2), small enough to work by hand
S_T = torch.tensor([[1.0, 2.0]])
H = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])


def test_dot_by_hand():
    assert DotScore()(S_T, H).tolist() == [[1.0, 2.0, 3.0]]


def test_scaled_dot_by_hand():
    torch.testing.assert_close(ScaledDotScore(dim=2)(S_T, H), torch.tensor([[1.0, 2.0, 3.0]]) / math.sqrt(2))


def test_general_by_hand():
    score = GeneralScore(query_dim=2, key_dim=2)
    score.W_a.weight.data = torch.tensor([[0.0, 1.0], [2.0, 0.0]])  # W h_i
    # s^T W h: W h_1 = (0, 2) -> 4; W h_2 = (1, 0) -> 1; W h_3 = (1, 2) -> 5
    assert score(S_T, H).tolist() == [[4.0, 1.0, 5.0]]


def test_concat_by_hand():
    score = ConcatScore(query_dim=2, key_dim=2, attention_dim=1)
    score.W_a.weight.data = torch.tensor([[1.0, 0.0, 1.0, -1.0]])  # W[s; h] = s_1 + h_1 - h_2
    score.v_a.weight.data = torch.tensor([[2.0]])
    expected = 2 * torch.tanh(torch.tensor([[1.0 + 1 - 0, 1.0 + 0 - 1, 1.0 + 1 - 1]]))
    torch.testing.assert_close(score(S_T, H), expected)


def test_additive_by_hand():
    score = AdditiveScore(query_dim=2, key_dim=2, attention_dim=2)
    score.W_1.weight.data = torch.eye(2)
    score.W_2.weight.data = torch.eye(2) * 2
    score.W_2.bias.data = torch.zeros(2)
    score.v_a.weight.data = torch.tensor([[1.0, -1.0]])
    s, h = S_T[0], H[0]
    expected = torch.stack([torch.tanh(s + 2 * hi) @ torch.tensor([1.0, -1.0]) for hi in h])[None]
    torch.testing.assert_close(score(S_T, H), expected)


def test_cosine_by_hand():
    expected = torch.tensor([[1 / math.sqrt(5), 2 / math.sqrt(5), 3 / math.sqrt(10)]])
    torch.testing.assert_close(CosineScore()(S_T, H), expected)


def test_location_by_hand():
    score = LocationScore(query_dim=2, max_source_len=5)
    score.W_a.weight.data = torch.arange(10.0).view(5, 2)
    score.W_a.bias.data = torch.zeros(5)
    # W s for the first 3 positions: (0*1+1*2, 2+6, 4+10)
    assert score(S_T, H).tolist() == [[2.0, 8.0, 14.0]]
    with pytest.raises(ValueError, match="max_source_len"):
        score(S_T, torch.zeros(1, 6, 2))


def test_distribution_and_context_vector():
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    alpha = attention_distribution(scores, torch.tensor([[True, True, False]]))
    e = torch.exp(torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(alpha, torch.tensor([[e[0] / e.sum(), e[1] / e.sum(), 0.0]]))
    torch.testing.assert_close(context_vector(alpha, H), alpha[0, 0] * H[0, 0:1] + alpha[0, 1] * H[0, 1:2])
    assert torch.all(attention_distribution(scores, torch.zeros(1, 3, dtype=torch.bool)) == 0)


@pytest.mark.parametrize("make", [lambda: GeneralScore(query_dim=3, key_dim=3),
                                  lambda: ConcatScore(query_dim=3, key_dim=3, attention_dim=4),
                                  lambda: AdditiveScore(query_dim=3, key_dim=3, attention_dim=4),
                                  lambda: CosineScore()])
def test_gradcheck_scores(make):
    score = make().double()
    q = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, k: score(q, k), (q, k))


def _autograd_energy(score, q, k):
    """The plain formula, as autograd would differentiate it (keeping the (B, S, A) tanh)."""
    if isinstance(score, AdditiveScore):
        query_part = score.W_1(q)
    else:  # concat: W_s s, the query's columns of W_a
        query_part = torch.nn.functional.linear(q, score.W_a.weight[:, : score.query_dim])
    return score.v_a(torch.tanh(query_part.unsqueeze(1) + score.prepare_keys(k))).squeeze(-1)


TANH_SCORES = [lambda: ConcatScore(query_dim=16, key_dim=16, attention_dim=32),
               lambda: AdditiveScore(query_dim=16, key_dim=16, attention_dim=32)]


@pytest.mark.parametrize("autocast", [False, True])
@pytest.mark.parametrize("make", TANH_SCORES)
def test_tanh_energy_is_bitwise_autograds(make, autocast):
    """The recomputing backward gives autograd's own scores and gradients bit for bit, in fp32 and bf16."""
    torch.manual_seed(0)
    score, q, k = make(), torch.randn(5, 16), torch.randn(5, 7, 16)
    results = []
    for energy in (_autograd_energy, lambda score, q, k: score(q, k)):
        score.zero_grad()
        q_, k_ = q.clone().requires_grad_(), k.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            e = energy(score, q_, k_)
        (e.float() * torch.arange(35.0).view(5, 7)).sum().backward()
        results.append([e.detach(), q_.grad, k_.grad] + [p.grad.clone() for p in score.parameters()])
    assert results[0][0].dtype == (torch.bfloat16 if autocast else torch.float32)
    for ours, autograds in zip(results[1], results[0]):
        assert torch.equal(ours, autograds)


@pytest.mark.parametrize("make", TANH_SCORES)
def test_tanh_energy_keeps_no_per_step_tanh(make):
    """What a step keeps for backward: no (B, S, A) tensor but the prepared keys themselves (it set the
    Bahdanau config's training peak)."""
    score = make()
    keys = torch.randn(5, 7, 16, requires_grad=True)
    prepared = score.prepare_keys(keys)
    kept = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t) or t, lambda t: t):
        score.score(torch.randn(5, 16, requires_grad=True), prepared)
    big = [t for t in kept if t.shape == (5, 7, 32)]
    assert big and all(t.data_ptr() == prepared.data_ptr() for t in big), [t.shape for t in kept]

import math
from dataclasses import dataclass

import pytest
import torch

from aiayn.decoding.beam import SearchParams, beam_search, length_penalty, top_candidates
from aiayn.decoding.greedy import greedy_decode
from aiayn.decoding.sampling import filter_logits, sample_decode
from tests.model_helpers import small_model

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4


@dataclass
class FakeState:
    prefixes: list

    def select(self, rows, sentences=None):
        return FakeState([self.prefixes[i] for i in rows.tolist()])


class ScriptedModel:
    """Per-step probabilities fixed by the prefix, so beam search can be worked out by hand."""

    SCRIPT = {(): {EOS: 0.4, A: 0.35, B: 0.25}, (A,): {EOS: 0.9, A: 0.05, B: 0.05},
              (B,): {EOS: 0.5, A: 0.25, B: 0.25}}

    def encode(self, src, return_attention=False):
        return src, None

    def init_state(self, memory, src):
        return FakeState([() for _ in range(src.size(0))])

    def decode_step(self, tokens, state, return_attention=False):
        if state.prefixes and tokens[0] != BOS:
            state = FakeState([p + (t,) for p, t in zip(state.prefixes, tokens.tolist())])
        rows = []
        for prefix in state.prefixes:
            probs = torch.full((5,), 1e-12)
            for tok, p in self.SCRIPT.get(prefix, {EOS: 1.0}).items():
                probs[tok] = p
            rows.append(probs.log())
        return torch.stack(rows), state, None


SRC = torch.tensor([[A, A, EOS]])


def search(model, src, **options):
    return beam_search(model, src, SearchParams(bos_id=BOS, eos_id=EOS, pad_id=PAD, **options))


def test_scripted_beam_by_hand_without_length_penalty():
    hyps = search(ScriptedModel(), SRC, beam=2, alpha=0.0, n_best=3)[0]
    # finished: [] at step 1 (0.4), [a] at step 2 (0.35 * 0.9), [b] at step 2 (0.25 * 0.5)
    assert [h.tokens for h in hyps] == [[], [A], [B]]
    expected = [math.log(0.4), math.log(0.35 * 0.9), math.log(0.25 * 0.5)]
    assert [h.log_prob for h in hyps] == pytest.approx(expected, abs=1e-6)
    assert [h.score for h in hyps] == pytest.approx(expected, abs=1e-6)


def test_scripted_beam_length_penalty_changes_the_winner():
    hyps = search(ScriptedModel(), SRC, beam=2, alpha=2.0, n_best=2)[0]
    # lp(1) = 1, lp(2) = (7/6)^2: log(0.315) / 1.361 = -0.849 beats log(0.4) = -0.916
    assert [h.tokens for h in hyps] == [[A], []]
    assert hyps[0].score == pytest.approx(math.log(0.35 * 0.9) / (7 / 6) ** 2, abs=1e-6)
    assert length_penalty(2, 2.0) == pytest.approx((7 / 6) ** 2)


def test_scripted_greedy_and_beam_one():
    hyps, scores = greedy_decode(ScriptedModel(), SRC, BOS, EOS, PAD)
    assert hyps == [[]] and scores.item() == pytest.approx(math.log(0.4), abs=1e-6)
    assert search(ScriptedModel(), SRC, beam=1)[0][0].tokens == []


def random_sources(n=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(3, 23, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist() + [EOS]
            for _ in range(n)]
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


@pytest.mark.parametrize("preset", ["tiny", "rnn-luong", "rnn-bahdanau"])
def test_beam_one_equals_greedy(preset):
    model = small_model(preset, d_model=32) if preset != "tiny" else small_model()
    src = random_sources()
    hyps, scores = greedy_decode(model, src, BOS, EOS, PAD, max_len_b=10)
    beams = search(model, src, beam=1, max_len_b=10)
    assert [b[0].tokens for b in beams] == hyps
    torch.testing.assert_close(torch.tensor([b[0].log_prob for b in beams]), scores, atol=1e-4, rtol=1e-4)


def test_output_does_not_depend_on_batch_neighbours():
    model = small_model()
    src = random_sources(8, seed=2)
    together = search(model, src, beam=4, max_len_b=12, n_best=2)
    for i in range(src.size(0)):
        row = src[i: i + 1, : int((src[i] != PAD).sum())]
        alone = search(model, row, beam=4, max_len_b=12, n_best=2)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in together[i]]
        assert [h.score for h in alone] == pytest.approx([h.score for h in together[i]], abs=1e-4)


def test_beam_scores_equal_recomputed_prefix_log_probs():
    model = small_model()
    src = random_sources(3, seed=4)
    for i, hyps in enumerate(search(model, src, beam=3, max_len_b=8, n_best=3)):
        for h in hyps:
            ended = len(h.tokens) < 8 + int((src[i] != PAD).sum())  # not cut at the length limit
            tgt = torch.tensor([[BOS] + h.tokens])
            out = torch.tensor(h.tokens + ([EOS] if ended else []))
            with torch.no_grad():
                lp = torch.log_softmax(model(src[i: i + 1], tgt), -1)[0, : len(out)]
            assert lp.gather(1, out[:, None]).sum().item() == pytest.approx(h.log_prob, abs=1e-4)


def test_sampling_top_k_one_is_greedy_and_filters():
    model = small_model()
    src = random_sources(4, seed=5)
    greedy, _ = greedy_decode(model, src, BOS, EOS, PAD, max_len_b=8)
    sampled, _ = sample_decode(model, src, BOS, EOS, PAD, top_k=1, max_len_b=8,
                               generator=torch.Generator().manual_seed(1))
    assert sampled == greedy
    lp = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(lp, top_k=2)[0, 2:]).all()
    kept = torch.isfinite(filter_logits(lp, top_p=0.7)[0])
    assert kept.tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="temperature"):
        sample_decode(model, src, BOS, EOS, PAD, temperature=0)


class EarlyEndModel(ScriptedModel):
    """Two poor hypotheses end early while a much better one is still live: stopping at the first K
    finished hypotheses would lose it."""

    SCRIPT = {(): {A: 0.9, EOS: 0.06, B: 0.04}, (A,): {A: 0.9, EOS: 0.06, B: 0.04}, (B,): {EOS: 0.9, A: 0.1},
              (A, A): {A: 0.9, EOS: 0.1}}


def test_beam_keeps_a_better_live_hypothesis():
    hyps = search(EarlyEndModel(), SRC, beam=2, alpha=0.0, n_best=2)[0]
    # step 1 finishes [] (0.06), step 2 finishes [a] (0.054): K = 2 finished while "a a" (0.81) is live
    assert hyps[0].tokens == [A, A, A]
    assert hyps[0].log_prob == pytest.approx(math.log(0.9 ** 3), abs=1e-6)


def test_early_stopping_ends_at_k_finished_hypotheses():
    # fairseq's and CTranslate2's rule: [] (0.06) and [a] (0.054) finish by step 2, so "a a a" is never reached
    hyps = search(EarlyEndModel(), SRC, beam=2, alpha=0.0, n_best=2, early_stopping=True)[0]
    assert [h.tokens for h in hyps] == [[], [A]]
    assert hyps[0].log_prob == pytest.approx(math.log(0.06), abs=1e-6)


def test_min_length_forbids_an_early_end():
    # without it [] wins (0.4); with min_length 1 the best one-token outputs are [a] (0.315) and [b] (0.125)
    hyps = search(ScriptedModel(), SRC, beam=2, alpha=0.0, n_best=2, min_length=1)[0]
    assert [h.tokens for h in hyps] == [[A], [B]]


def test_target_prefix_is_forced_and_scored():
    # forcing [b]: it costs log 0.25 and the search continues from there ([b] then EOS: 0.5)
    hyps = search(ScriptedModel(), SRC, beam=2, alpha=0.0)[0]
    assert hyps[0].tokens == []
    forced = beam_search(ScriptedModel(), SRC, SearchParams(bos_id=BOS, eos_id=EOS, pad_id=PAD, beam=2, alpha=0.0),
                         prefixes=[[B]])[0][0]
    assert forced.tokens == [B] and forced.log_prob == pytest.approx(math.log(0.25 * 0.5), abs=1e-6)


def test_no_repeat_ngram_size_bans_a_repeated_token():
    # EarlyEndModel's best is "a a a"; with no token twice (1-grams), "a" then "b" is all that is left
    hyps = search(EarlyEndModel(), SRC, beam=2, alpha=0.0, no_repeat_ngram_size=1)[0]
    assert all(len(h.tokens) == len(set(h.tokens)) for h in hyps) and hyps[0].tokens != [A, A, A]


def test_block_candidates_equal_a_full_topk():
    g = torch.Generator().manual_seed(0)
    for B, G, V in ((3, 4, 2000), (2, 1, 1300), (2, 2, 1024), (5, 3, 64)):  # blocks with and without overhang; all
        for boost in (0.0, 6.0):  # 6: a token of the partial last block wins, and one just before that block
            log_probs = torch.randn(B, G, V, generator=g)
            log_probs[:, :, [V - 3, V // 128 * 128 - 5]] += boost
            log_probs = torch.log_softmax(log_probs, -1)
            scores = torch.randn(B, G, generator=g)
            values, origin, token = top_candidates(log_probs, scores, 2 * G)
            expected, index = (scores[:, :, None] + log_probs).view(B, G * V).topk(2 * G, dim=1)
            torch.testing.assert_close(values, expected)
            assert torch.equal(origin * V + token, index)

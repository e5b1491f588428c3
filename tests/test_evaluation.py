import pytest

from aiayn.evaluation import MIN_BOOTSTRAP, EvaluationError, compare_systems, evaluate_corpus

HYPS = ["a dog runs in the park", "two men play football", "a woman is cooking", "the cat sleeps"] * 5
REFS = ["a dog runs through the park", "two men are playing soccer", "a woman cooks", "the cat is asleep"] * 5


@pytest.mark.parametrize("bootstrap", [1, 2, MIN_BOOTSTRAP - 1, -5, 10**9])
def test_a_bootstrap_too_small_or_too_large_is_refused(bootstrap):
    """--bootstrap 1 used to print a "95% CI" of one resampled score, which could exclude the score."""
    with pytest.raises(EvaluationError, match=rf"--bootstrap {bootstrap}: .*0 turns it off"):
        evaluate_corpus(HYPS, REFS, bootstrap=bootstrap)


def test_the_smallest_bootstrap_brackets_the_score_and_zero_turns_it_off():
    for s in evaluate_corpus(HYPS, REFS, bootstrap=MIN_BOOTSTRAP):
        assert s.ci_low <= s.score <= s.ci_high
    assert all(s.ci_low is None and s.ci_high is None for s in evaluate_corpus(HYPS, REFS, bootstrap=0))


def test_empty_or_misaligned_input_is_refused():
    with pytest.raises(EvaluationError, match="no sentences to score"):
        evaluate_corpus([], [], bootstrap=0)
    with pytest.raises(EvaluationError, match="20 hypotheses but 19 references"):
        evaluate_corpus(HYPS, REFS[:-1])
    with pytest.raises(EvaluationError, match="n_samples=0"):
        compare_systems(HYPS, HYPS, REFS, n_samples=0)
    with pytest.raises(EvaluationError, match="aligned"):
        compare_systems(HYPS[:-1], HYPS, REFS)

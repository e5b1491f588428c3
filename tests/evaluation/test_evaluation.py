import json

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


def test_a_system_compared_with_itself_is_not_significant():
    """sacreBLEU's paired bootstrap gives identical systems p = 1 / (n + 1), its smallest p (no resampled
    difference is strictly above the observed 0): 0.0010 for 1000 samples, read as significant."""
    same = compare_systems(HYPS, list(HYPS), REFS, n_samples=MIN_BOOTSTRAP)
    assert same["identical"] is True
    assert [same[m]["p_value"] for m in ("BLEU", "chrF2")] == [1.0, 1.0]
    assert same["BLEU"]["baseline"] == same["BLEU"]["candidate"] > 0
    spaced = [h.replace(" park", "  park") for h in HYPS]  # differs only where neither metric looks
    invisible = compare_systems(HYPS, spaced, REFS, n_samples=MIN_BOOTSTRAP)
    assert invisible["identical"] is False and invisible["BLEU"]["p_value"] == invisible["chrF2"]["p_value"] == 1.0
    better = compare_systems(HYPS, REFS, REFS, n_samples=MIN_BOOTSTRAP)
    assert better["identical"] is False and better["BLEU"]["p_value"] < 0.05


def _test_files(tmp_path, sources):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("".join(s + "\n" for s in sources))
    ref.write_text("".join("neun\n" for _ in sources))
    return ["--src", str(src), "--ref", str(ref), "--bootstrap", "0"]


def test_cli_compare_with_itself_says_identical(transformer_dir, tmp_path, capsys):
    from aiayn.cli import main

    args = ["evaluate", "--model", str(transformer_dir), "--compare", str(transformer_dir), "--beam", "1",
            *_test_files(tmp_path, ["nine", "forty five", "three hundred"])]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"vs {transformer_dir}: the outputs are identical, sentence for sentence (p = 1.0)" in out
    assert "p = 0.0" not in out
    assert main(args + ["--json"]) == 0
    compare = json.loads(capsys.readouterr().out)["compare"]
    assert compare["identical"] is True and compare["BLEU"]["p_value"] == 1.0


@pytest.mark.parametrize("n_long", [2, 12])
def test_cli_evaluate_warns_of_cut_sources_as_translate_does(transformer_dir, tmp_path, capsys, monkeypatch, n_long):
    """Sources longer than the model's positions are cut and scored so: a warning per sentence (a count
    with the first numbers beyond 10), and the numbers in --json."""
    from aiayn.cli import main
    from aiayn.decoding.translator import Translator

    monkeypatch.setattr(Translator, "max_positions", 4)
    sources = ["nine"] + ["forty five thousand six hundred"] * n_long
    args = ["evaluate", "--model", str(transformer_dir), "--beam", "1", *_test_files(tmp_path, sources)]
    assert main(args + ["--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["truncated"] == list(range(2, n_long + 2))
    src = tmp_path / "src.txt"
    if n_long == 2:
        assert captured.err.count("\n") == 2 and f"warning: {src}:2: longer than the model's maximum" in captured.err
        assert f"{src}:3:" in captured.err and f"{src}:1:" not in captured.err
    else:
        assert captured.err == (f"warning: {src}: 12 sources are longer than the model's maximum source length "
                                f"(lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ...); translated only their beginnings, "
                                f"and scored so\n")
    assert main(args) == 0
    assert "longer than the model's maximum" in capsys.readouterr().err  # the text report warns the same

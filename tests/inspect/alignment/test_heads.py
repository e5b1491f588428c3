import numpy as np
import pytest

from aiayn.data.synthetic import aligned, english, german, gold_alignments, number_of, number_task
from aiayn.inspect.alignment.gold import GoldError, aer, parse_links, read_gold
from aiayn.inspect.alignment.heads import HeadRanking, argmax_links
from aiayn.inspect.maps.attention_maps import AttentionMaps
from aiayn.inspect.maps.capture import hard_alignment
from aiayn.inspect.maps.checks import InspectError


def test_aer_by_hand():
    # A = {0-0, 1-1, 2-1}; S = {0-0, 1-2}; P = S + {2-1}
    # |A∩S| = 1 (0-0), |A∩P| = 2 (0-0, 2-1), |A| = 3, |S| = 2: AER = 1 - (1 + 2) / (3 + 2) = 0.4
    gold = parse_links("0-0 1-2 2?1")
    assert aer([{(0, 0), (1, 1), (2, 1)}], [gold]) == pytest.approx(0.4)
    # sure links only (P = S): 1 - 2|A∩S| / (|A| + |S|) = 1 - 2 / 6
    assert aer([{(0, 0), (1, 2), (2, 1)}], [parse_links("0-0 1-1 2-2")]) == pytest.approx(2 / 3)
    assert aer([{(0, 0)}], [parse_links("0-0")]) == 0.0


def test_aer_is_summed_over_the_corpus_not_averaged():
    # sentence 1: A = S = {0-0}; sentence 2: A = {0-0, 1-0, 2-0}, S = {0-0, 1-1, 2-2}
    # counts: |A| = 4, |S| = 4, |A∩S| = |A∩P| = 2 -> 1 - 4 / 8 = 0.5 (the mean of ratios would be 1/3)
    golds = [parse_links("0-0"), parse_links("0-0 1-1 2-2")]
    assert aer([{(0, 0)}, {(0, 0), (1, 0), (2, 0)}], golds) == pytest.approx(0.5)


def test_gold_file_that_does_not_fit_is_one_line(tmp_path):
    pairs = [("one two", "eins zwei"), ("three", "drei")]
    gold = tmp_path / "gold.align"
    gold.write_text("0-0 1-1\n")
    with pytest.raises(GoldError, match="1 lines for 2 sentence pairs"):
        read_gold(gold, pairs)
    gold.write_text("0-0 1-1\n1-0\n")
    with pytest.raises(GoldError, match=r"gold.align:2: link 1-0: source word 1 does not exist") as err:
        read_gold(gold, pairs)
    assert "\n" not in str(err.value)
    gold.write_text("0-0 1:1\n0-0\n")
    with pytest.raises(GoldError, match=r"gold.align:1: '1:1' is not a link"):
        read_gold(gold, pairs)
    gold.write_text("0-0 1?1\n\n")
    first, second = read_gold(gold, pairs)
    assert first.sure == {(0, 0)} and first.possible == {(0, 0), (1, 1)} and not second.possible


def test_number_task_gold_follows_the_generator():
    for n in [*range(0, 1200), 21021, 121021, 999999, 100001]:
        en, de, sure, possible = aligned(n)
        assert en == english(n).split() and de == german(n).split() and number_of(english(n)) == n
        assert {j for _, j in sure | possible} == set(range(len(de)))  # every German word has a link
    # "twenty one" -> "ein und zwanzig": one-0, twenty-2, "und" possibly either
    assert gold_alignments([("twenty one", "ein und zwanzig")]) == ["0?1 0-2 1-0 1?1"]
    assert gold_alignments([("one thousand five", "ein tausend fünf")]) == ["0-0 1-1 2-2"]
    pairs = number_task(200, 20, 20)["test"]
    assert len(gold_alignments(pairs)) == 20


def _maps(cross: np.ndarray, n_src: int, n_tgt: int) -> AttentionMaps:
    src = [f"s{i}" for i in range(n_src)] + ["</s>"]
    tgt = [f"t{j}" for j in range(n_tgt)] + ["</s>"]
    return AttentionMaps(src, tgt, ["<s>"] + tgt[:-1], "", "transformer", {"cross": cross}, merged=True)


def test_a_diagonal_head_ranks_first_with_aer_zero():
    rng = np.random.default_rng(0)
    n = 4
    cross = rng.dirichlet(np.ones(n + 1), size=(2, 3, n + 1)).astype(np.float32)  # (L, H, T, S)
    cross[1, 2] = 0.02
    cross[1, 2, np.arange(n + 1), np.arange(n + 1)] = 0.92  # layer 1, head 2 attends to word j at word j
    ranking = HeadRanking(n_layers=2, n_heads=3)
    ranking.add(_maps(cross, n, n), parse_links(" ".join(f"{j}-{j}" for j in range(n))))
    scores = ranking.scores()
    assert len(scores) == 2 * (3 + 1)  # every head and each layer's mean
    assert scores[0].name == "2:3" and scores[0].aer == 0.0
    assert scores[0].focus == pytest.approx(0.92) and scores[0].coverage == 1.0
    assert [s.aer for s in scores] == sorted(s.aer for s in scores)
    # the links of a head are hard_alignment's for that head
    links = argmax_links(cross[0, 1], n, n)
    expected = {tuple(map(int, p.split("-"))) for p in hard_alignment(_maps(cross, n, n), 0, [1]).split()}
    assert links == expected


def test_without_gold_heads_are_ranked_by_score():
    n = 3
    cross = np.full((1, 2, n + 1, n + 1), 1 / (n + 1), dtype=np.float32)  # head 0: flat
    cross[0, 1] = np.eye(n + 1, dtype=np.float32)  # head 1: one word each
    ranking = HeadRanking(n_layers=1, n_heads=2)
    ranking.add(_maps(cross, n, n), None)
    scores = ranking.scores()
    assert scores[0].name == "1:2" and scores[0].aer is None and scores[0].entropy == pytest.approx(0, abs=1e-6)
    flat = next(s for s in scores if s.name == "1:1")
    assert flat.entropy == pytest.approx(1.0)


def test_rank_heads_on_a_model(transformer_dir, monkeypatch, tmp_path):
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.alignment import head_choice
    from aiayn.inspect.alignment.heads import rank_heads

    translator = Translator.from_pretrained(transformer_dir)
    pairs = head_choice.builtin_pairs(head_choice.model_config(translator).data)[:4]  # the fixture's is the task's
    scores, skipped = rank_heads(translator, pairs, head_choice.builtin_golds(pairs))
    assert skipped == 0 and len(scores) == 2 * (4 + 1)
    assert all(0.0 <= s.aer <= 1.0 for s in scores)
    choose = head_choice.choose_head
    assert choose("2:mean", translator) == (1, None) and choose("1:4", translator) == (0, 3)
    monkeypatch.setattr(head_choice, "builtin_pairs", lambda data: pairs)  # "best" ranks these four
    layer, head = choose("best", translator)
    assert f"{layer + 1}:{'mean' if head is None else head + 1}" == scores[0].name  # names count from 1
    (tmp_path / "bad.json").write_text("{not json")
    for bad, says in (("9:9", "no such head; the model has 2 decoder layers"), ("x", "give L:H"),
                      (str(tmp_path / "missing.json"), "no such file"),
                      (str(tmp_path / "bad.json"), "not a ranking written by")):
        with pytest.raises(InspectError, match=says) as err:
            choose(bad, translator)
        assert "\n" not in str(err.value)
    # the last layer's mean is what --alignment has always printed
    from aiayn.inspect.maps.capture import word_alignment

    result = translator.translate(["twenty one"], return_attention=True)[0]
    assert head_choice.head_alignment(result, translator, 1, None) == word_alignment(result, translator)


def test_write_gold_command(tmp_path, capsys):
    from aiayn.cli import main

    out = tmp_path / "gold.align"
    assert main(["heads", "--write-gold", str(out)]) == 0
    pairs = list(zip(out.with_suffix(".align.src").read_text().splitlines(),
                     out.with_suffix(".align.tgt").read_text().splitlines()))
    assert len(pairs) == 300 and len(read_gold(out, pairs)) == 300  # every link within its sentences
    assert main(["heads"]) == 2 and "give --model" in capsys.readouterr().err


def test_write_gold_never_writes_inside_the_model(transformer_dir, capsys):
    from aiayn.cli import main

    assert main(["heads", "--model", str(transformer_dir), "--write-gold", str(transformer_dir / "gold.align")]) == 2
    assert "inside the model directory" in capsys.readouterr().err
    assert not (transformer_dir / "gold.align").exists()

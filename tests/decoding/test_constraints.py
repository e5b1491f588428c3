"""Lexically constrained beam search (aiayn.decoding.constraints): every constraint in every output, nothing
changed without constraints (batch-mates included), one clear line for each bad input."""

import random
import re

import pytest
from fastapi.testclient import TestClient

from aiayn.cli import main
from aiayn.data.synthetic import number_task
from aiayn.decoding.constraints import ConstraintState
from aiayn.decoding.engines import Capabilities
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.web.app import create_app
from tests.cli_helpers import assert_user_error, run_cli

TINY = ["data.synthetic_train=2000", "data.synthetic_valid=10", "data.vocab_size=64", "data.byte_fallback=false",
        "model.d_model=32", "model.d_ff=64", "train.max_tokens=1024", "train.warmup_steps=20",
        "train.bleu_sentences=5", "train.num_threads=1", "train.eval_every=1000", "train.save_every=1000",
        "train.average_last=1", "train.max_steps=200", "train.bleu_every=100000"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny Transformer trained briefly on the number task (en -> de)."""
    out = tmp_path_factory.mktemp("constraints") / "run"
    assert main(["train", "--out", str(out)] + [x for s in TINY for x in ("--set", s)]) == 0
    return Translator.from_pretrained(out)


@pytest.fixture(scope="module")
def translator(transformer_dir):
    return Translator.from_pretrained(transformer_dir)


def _sources_and_terms(n: int, seed: int = 7):
    """n test sentences and, for most, 1-2 constraint phrases drawn from other sentences' references."""
    pairs = number_task(10, 10, n, seed=seed)["test"]
    words = sorted({w for _, de in pairs for w in de.split()})
    rng = random.Random(seed)
    terms = [[] if i % 4 == 0 else [rng.choice(words)] + ([f"{rng.choice(words)} {rng.choice(words)}"] if i % 2
                                                          else []) for i in range(n)]
    return [en for en, _ in pairs], terms


def test_state_tracks_phrases_partial_matches_and_repeats():
    s = ConstraintState(phrases=((5, 6), (7,), (7,)))
    assert (s.met, s.total, s.wanted()) == (0, 4, {5, 7})
    s = s.advance(5)
    assert (s.met, s.partial) == (1, ((0, 1),))
    s = s.advance(9)  # not continued: the partial match is lost
    assert (s.met, s.partial) == (0, ())
    s = s.advance(5).advance(6).advance(7)
    assert (s.met, s.all_met) == (3, False)  # one token completes one phrase: "7" is wanted twice
    s = s.advance(7)
    assert s.all_met and s.unmet == 0 and s.wanted() == set()


@pytest.mark.slow
def test_every_output_of_a_trained_model_contains_every_constraint(trained):
    sources, terms = _sources_and_terms(60)
    for n_best, early in ((1, False), (2, True)):
        results = trained.translate(sources, constraints=terms, n_best=n_best, early_stopping=early)
        for result, phrases in zip(results, terms):
            assert result.constraints_met
            for phrase in phrases:
                assert phrase in result.text, (phrase, result.text)


@pytest.mark.slow
def test_without_constraints_outputs_are_bit_identical_and_batch_mates_do_not_change(trained):
    sources, terms = _sources_and_terms(60)
    plain = trained.translate(sources, n_best=2)
    empty = trained.translate(sources, n_best=2, constraints=[[] for _ in sources])
    mixed = trained.translate(sources, n_best=2, constraints=terms)
    for i, (a, b, c) in enumerate(zip(plain, empty, mixed)):
        assert (a.text, a.score, a.n_best) == (b.text, b.score, b.n_best)
        if not terms[i]:  # an unconstrained sentence beside constrained ones
            assert (a.text, a.score, a.n_best) == (c.text, c.score, c.n_best)
    # a constrained sentence alone gives what it gives in the batch (scores to float rounding: a batch of
    # another shape sums in another order, with or without constraints)
    alone = [trained.translate([s], n_best=2, constraints=[t])[0] for s, t in list(zip(sources, terms))[:12]]
    for a, c in zip(alone, mixed):
        assert [text for text, _ in a.n_best] == [text for text, _ in c.n_best]
        assert [score for _, score in a.n_best] == pytest.approx([score for _, score in c.n_best], abs=1e-5)


def test_constraints_are_met_on_an_untrained_model_with_prefix_and_attention(translator):
    sources, terms = _sources_and_terms(16)
    results = translator.translate(sources, constraints=terms, target_prefix=["drei" if i % 3 else "" for i in
                                                                              range(16)], return_attention=True)
    for i, (result, phrases) in enumerate(zip(results, terms)):
        assert all(p in result.text for p in phrases) and result.constraints_met
        assert result.text.startswith("drei") or i % 3 == 0
        assert result.attention["cross"].shape[2] in (len(result.tokens), len(result.tokens) + 1)  # with </s> or not


def test_bad_constraints_are_one_line_each(translator):
    with pytest.raises(AiaynError, match=r"sentence 1: constraint 1: the model cannot write ж"):
        translator.translate(["one"], constraints=[["жук"]])
    with pytest.raises(AiaynError, match=r"sentence 1: its constraints take \d+ tokens, but outputs are at most 8"):
        translator.translate(["one"], constraints=[["neun hundert neun und neunzig tausend"] * 2], max_output_len=8)
    with pytest.raises(AiaynError, match="sampling draws one translation per sentence: drop constraints"):
        translator.translate(["one"], constraints=[["neun"]], sampling=SamplingOptions(seed=1))
    with pytest.raises(AiaynError, match="constraints has 2 entries for 1 sentences"):
        translator.translate(["one"], constraints=[["neun"], []])
    with pytest.raises(AiaynError, match="sentence 1: constraint 2 is blank"):
        translator.translate(["one"], constraints=[["neun", " "]])
    with pytest.raises(AiaynError, match="give one list of phrases per sentence"):
        translator.translate(["one"], constraints=["neun"])


def test_an_engine_without_constraints_refuses_them(transformer_dir, monkeypatch):
    t = Translator.from_pretrained(transformer_dir)
    monkeypatch.setattr(t.backend, "capabilities", Capabilities(name="ct2", constraints=False))
    with pytest.raises(AiaynError, match="constraints need the native engine"):
        t.translate(["one"], constraints=[["neun"]])
    t.translate(["one"], constraints=[[]])  # none given: nothing to refuse


def test_cli_constraints_file(transformer_dir, tmp_path, capsys):
    src, cons, out = tmp_path / "in.txt", tmp_path / "c.txt", tmp_path / "out.txt"
    src.write_text("one\ntwo hundred\nthree\n")
    cons.write_text("neun\tsieben\n\nacht und\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--constraints", cons,
                            "--output", out], capsys)
    assert code == 0, output
    lines = out.read_text().splitlines()
    assert "neun" in lines[0] and "sieben" in lines[0] and "acht und" in lines[2]
    cons.write_text("neun\n\nacht\nsieben\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--constraints", cons,
                            "--output", out], capsys)
    assert_user_error(code, output, f"--constraints {cons} has 4 lines for 3 input lines")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--constraints", cons,
                            "--sample"], capsys)
    assert_user_error(code, output, "drop --constraints")


def test_rest_constraints_per_text(transformer_dir):
    client = TestClient(create_app(Translator.from_pretrained(transformer_dir)))
    r = client.post("/api/translate", json={"text": "one", "attention": False, "constraints": ["neun", "acht"]})
    assert r.status_code == 200 and "neun" in r.json()["translation"] and "acht" in r.json()["translation"]
    r = client.post("/api/translate_batch", json={"texts": ["one", "two"], "constraints": [[], ["sieben"]]})
    first, second = r.json()["translations"]
    assert "sieben" in second["translation"]
    alone = client.post("/api/translate_batch", json={"texts": ["one"]}).json()["translations"][0]
    assert first == alone
    r = client.post("/api/translate_batch", json={"texts": ["one"], "constraints": [["жук"]]})
    assert r.status_code == 400 and "cannot write" in r.json()["error"]


@pytest.fixture(scope="module")
def separate_translator(tmp_path_factory):
    """A model whose tokenizer reads </s>, <pad> and <unk> written in text as their ids (Marian's kind)."""
    from aiayn.data.separate_tokenizer import SeparateTokenizer
    from tests.model_helpers import model_dir

    pairs = number_task(300, 10, 10, seed=1)["train"]
    tok = SeparateTokenizer.train([p[0] for p in pairs], [p[1] for p in pairs], 64, False)
    return Translator.from_pretrained(model_dir(tmp_path_factory.mktemp("separate") / "model", tok, "tiny"))


@pytest.mark.parametrize("piece, what", [("</s>", "the end of a sentence"), ("<pad>", "padding"),
                                         ("<unk>", "an unknown piece"), ("<s>", "the start of a sentence")])
@pytest.mark.parametrize("which", ["translator", "separate_translator"])
def test_a_reserved_piece_as_prefix_or_constraint_is_one_line_naming_it(request, which, piece, what):
    t = request.getfixturevalue(which)
    reserved = re.escape(f"{piece} ({what}) is a piece the model reserves, not text it writes")
    with pytest.raises(AiaynError, match=f"^target prefix 1: {reserved}"):
        t.translate(["one"], target_prefix=[f"neun {piece}"])
    with pytest.raises(AiaynError, match=f"^sentence 1: constraint 2: {reserved}"):
        t.translate(["one"], constraints=[["neun", piece]])


def test_cli_reserved_piece_in_a_prefix_file(transformer_dir, tmp_path, capsys):
    src, prefix = tmp_path / "in.txt", tmp_path / "p.txt"
    src.write_text("one\n")
    prefix.write_text("</s>\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--target-prefix", prefix],
                           capsys)
    assert_user_error(code, output, "</s> (the end of a sentence) is a piece the model reserves")
    assert output.count("\n") == 1

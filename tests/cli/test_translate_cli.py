import json
import subprocess
import sys

import pytest

from aiayn.cli import main
from aiayn.decoding.translator import Translator
from aiayn.errors import CheckpointError
from aiayn.evaluation import compare_systems, evaluate_corpus
from aiayn.run_dir import resolve_model_dir

SENTENCES = ["forty five", "three hundred twenty one", "nine"]


def test_translator_from_pretrained_n_best(transformer_dir):
    t = Translator.from_pretrained(transformer_dir)
    results = t.translate(SENTENCES, beam=3, n_best=3)
    assert len(results) == 3
    for r in results:
        assert len(r.n_best) == 3 and r.n_best[0] == (r.text, r.score)
        assert [s for _, s in r.n_best] == sorted((s for _, s in r.n_best), reverse=True)
        assert r.src_tokens[-1] == "</s>"
    assert [r.text for r in t.translate(SENTENCES[::-1], beam=3)] == [r.text for r in results][::-1]
    with pytest.raises(ValueError, match="n_best"):
        t.translate(SENTENCES, beam=2, n_best=3)


def test_resolve_model_dir_errors(tmp_path):
    with pytest.raises(CheckpointError, match="pass --model"):
        resolve_model_dir(tmp_path)
    with pytest.raises(CheckpointError, match="no such directory"):
        resolve_model_dir(tmp_path / "missing")
    (tmp_path / "latest").write_text("../../elsewhere\n")  # `latest` is a name, never a path
    with pytest.raises(CheckpointError, match="not a checkpoint name"):
        resolve_model_dir(tmp_path)


def test_cli_translate_file_and_stdin(transformer_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    out = tmp_path / "out.txt"
    assert main(["translate", "--model", str(transformer_dir), "--input", str(src), "--output", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    proc = subprocess.run([sys.executable, "-m", "aiayn", "translate", "--model", str(transformer_dir),
                           "--n-best", "2"], input="forty five\nnine\n", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = proc.stdout.splitlines()
    assert len(rows) == 4 and rows[0].startswith("0\t") and rows[1].startswith("1\t")
    assert rows[0].split("\t")[2] == lines[0]


def test_cli_bad_input_is_a_clear_error(transformer_dir, tmp_path, capsys):
    assert main(["translate", "--model", str(tmp_path), "--input", "x"]) == 2
    assert "pass --model" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    assert main(["translate", "--model", str(transformer_dir), "--input", str(bad)]) == 2
    assert "bad.txt:2" in capsys.readouterr().err


def test_cli_evaluate_json_has_signature(transformer_dir, tmp_path, capsys):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    ref.write_text("fünf und vierzig\ndrei hundert ein und zwanzig\nneun\n")
    args = ["evaluate", "--model", str(transformer_dir), "--src", str(src), "--ref", str(ref), "--bootstrap", "100"]
    assert main(args + ["--json", "--compare", str(transformer_dir)]) == 0
    report = json.loads(capsys.readouterr().out)
    names = [s["name"] for s in report["scores"]]
    assert names == ["BLEU", "BLEU-lc", "chrF", "TER"]
    assert report["scores"][0]["signature"].startswith("nrefs:1|case:mixed")
    assert report["scores"][1]["signature"].startswith("nrefs:1|case:lc")
    assert main(args) == 0
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in capsys.readouterr().out


def test_evaluation_matches_sacrebleu_and_ci_brackets_score():
    import sacrebleu

    hyps = ["a dog runs in the park", "two men play football", "a woman is cooking", "the cat sleeps"] * 5
    refs = ["a dog runs through the park", "two men are playing soccer", "a woman cooks", "the cat is asleep"] * 5
    scores = {s.name: s for s in evaluate_corpus(hyps, refs, bootstrap=200)}
    assert scores["BLEU"].score == pytest.approx(round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2))
    assert scores["chrF"].score == pytest.approx(round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2))
    assert scores["BLEU"].ci_low <= scores["BLEU"].score <= scores["BLEU"].ci_high
    better = compare_systems(hyps, refs, refs, n_samples=100)
    assert better["BLEU"]["candidate"] == 100.0 and better["BLEU"]["p_value"] < 0.05
    with pytest.raises(ValueError, match="aligned"):
        evaluate_corpus(hyps, refs[:-1])


def test_cli_average(transformer_dir, tmp_path, capsys):
    assert main(["average", str(transformer_dir), str(transformer_dir), "--out", str(tmp_path / "avg")]) == 0
    assert (tmp_path / "avg" / "model.safetensors").exists()
    assert json.loads((tmp_path / "avg" / "info.json").read_text())["averaged"]


@pytest.mark.parametrize("model", ["transformer_dir", "rnn_dir"])
def test_translate_prints_word_alignments(model, request, tmp_path, capsys):
    """`--alignment`: 'text ||| i-j ...', the same pairs as `aiayn attention --merge-words --out x.align`
    gives for that sentence, every index within the word counts; a blank line stays blank."""
    model_dir = request.getfixturevalue(model)
    src = tmp_path / "in.txt"
    src.write_text("forty five\n\nthree hundred twenty one\n")
    assert main(["translate", "--model", str(model_dir), "--input", str(src), "--alignment", "--beam", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[1] == " ||| "
    for line, sentence in ((lines[0], "forty five"), (lines[2], "three hundred twenty one")):
        text, alignment = line.split(" ||| ")
        pairs = [tuple(map(int, p.split("-"))) for p in alignment.split()]
        assert [j for _, j in pairs] == list(range(len(pairs))) and text  # one pair per output word
        assert all(0 <= i < len(sentence.split()) for i, _ in pairs)
        out = tmp_path / "a.align"
        assert main(["attention", "--model", str(model_dir), sentence, "--merge-words", "--beam", "2",
                     "--out", str(out)]) == 0
        assert out.read_text().strip() == alignment
    assert main(["translate", "--model", str(model_dir), "--input", str(src), "--alignment", "--beam", "2",
                 "--n-best", "2"]) == 2
    # CTranslate2 has no maps: refused before anything is exported into the model directory
    assert main(["translate", "--model", str(model_dir), "--input", str(src), "--alignment", "--engine", "ct2"]) == 2
    assert "needs the native engine" in capsys.readouterr().err and not (model_dir / "ct2").exists()


def test_sampling_through_the_translator_and_the_cli(transformer_dir, tmp_path, capsys):
    """--sample: repeatable with a seed, top_k=1 is greedy (beam 1), blank lines stay blank, options checked
    once in SamplingOptions; beam-search options with --sample are refused."""
    from aiayn.decoding.translator import SamplingOptions

    t = Translator.from_pretrained(transformer_dir)
    options = SamplingOptions(temperature=1.5, top_p=0.9, seed=7)
    first, again = t.sample(SENTENCES + [""], options=options), t.sample(SENTENCES + [""], options=options)
    assert [r.text for r in first] == [r.text for r in again] and first[-1].text == ""
    greedy = t.sample(SENTENCES, options=SamplingOptions(top_k=1, seed=1))
    assert [r.text for r in greedy] == [r.text for r in t.translate(SENTENCES, beam=1)]
    for bad in (SamplingOptions(temperature=0), SamplingOptions(top_k=-1), SamplingOptions(top_p=0),
                SamplingOptions(seed=-3)):
        with pytest.raises(ValueError):
            t.sample(SENTENCES, options=bad)
    src = tmp_path / "in.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    args = ["translate", "--model", str(transformer_dir), "--input", str(src), "--sample", "--seed", "3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert main(args) == 0 and capsys.readouterr().out == out and len(out.splitlines()) == 3
    for extra, needle in ((["--beam", "2"], "drop --beam"), (["--temperature", "-1"], "temperature")):
        assert main(args + extra) == 2 and needle in capsys.readouterr().err
    assert main(["translate", "--model", str(transformer_dir), "--input", str(src), "--top-k", "3"]) == 2
    assert "only with --sample" in capsys.readouterr().err


def spy_on_searches(monkeypatch) -> list:
    """Records each beam search's early_stopping (the outputs of an untrained model may not show it)."""
    from aiayn.decoding import engines

    seen, search = [], engines.beam_search

    def recorded(model, src, params, prefixes=None, **rest):
        seen.append(params.early_stopping)
        return search(model, src, params, prefixes, **rest)

    monkeypatch.setattr(engines, "beam_search", recorded)
    return seen


def test_decoding_controls_through_the_cli(transformer_dir, tmp_path, capsys, monkeypatch):
    """--target-prefix (a file, line by line), --min-length, --no-repeat-ngram-size and --max-tokens reach
    the search; a prefix file of the wrong length, bad values and --sample with them are refused."""
    src, prefix = tmp_path / "in.txt", tmp_path / "prefix.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    prefix.write_text("neun neun\n\nsieben\n")
    base = ["translate", "--model", str(transformer_dir), "--input", str(src)]
    assert main(base + ["--target-prefix", str(prefix), "--min-length", "4", "--no-repeat-ngram-size", "3",
                        "--max-tokens", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    t = Translator.from_pretrained(transformer_dir)
    expected = t.translate(SENTENCES, min_length=4, no_repeat_ngram_size=3, target_prefix=["neun neun", "", "sieben"])
    assert lines == [r.text for r in expected]
    assert lines[0].startswith("neun neun") and lines[2].startswith("sieben")
    assert all(len(r.tokens) >= 4 for r in expected)
    assert main(base + ["--target-prefix", str(prefix), "--output", str(prefix)]) == 2  # the prefixes are an input
    assert "is also an input" in capsys.readouterr().err and prefix.read_text() == "neun neun\n\nsieben\n"
    prefix.write_text("neun\n")
    assert main(base + ["--target-prefix", str(prefix)]) == 2
    assert "has 1 lines for 3 input lines" in capsys.readouterr().err
    seen = spy_on_searches(monkeypatch)
    for early in ("--early-stopping", "--no-early-stopping"):
        seen.clear()
        assert main(base + ["--beam", "3", early]) == 0
        assert seen and set(seen) == {early == "--early-stopping"}  # the flag reached the search
        wanted = t.translate(SENTENCES, beam=3, early_stopping=early == "--early-stopping")
        assert capsys.readouterr().out.splitlines() == [r.text for r in wanted]
    for extra, needle in ((["--max-tokens", "0"], "max_tokens"), (["--min-length", "-1"], "min_length"),
                          (["--sample", "--min-length", "2"], "drop --min-length"),
                          (["--sample", "--early-stopping"], "drop --early-stopping")):
        assert main(base + extra) == 2
        assert needle in capsys.readouterr().err


def test_translate_warns_of_unreadable_input_and_outputs_stopped_at_the_limit(transformer_dir, tmp_path, capsys):
    """An untrained model loops to its length limit; characters the tokenizer never saw are <unk>: both are
    one warning line naming the input line (the page shows the same warnings by code)."""
    from aiayn.cli import main

    (tmp_path / "in.txt").write_text("nine\n日本語\n", encoding="utf-8")
    assert main(["translate", "--model", str(transformer_dir), "--input", str(tmp_path / "in.txt"),
                 "--beam", "2"]) == 0
    err = capsys.readouterr().err
    assert f"{tmp_path / 'in.txt'}:2: " in err and "unknown or byte pieces" in err
    assert "stopped at its length limit" in err

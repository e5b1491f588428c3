"""Checks before cost: every refusal that needs only the options, the files and the models' config.yaml comes
before a model is loaded or compiled (a --compile run spends a minute and more compiling before it decodes);
and a search whose cache and scores would not fit in free memory is refused before it allocates them."""

import pytest

from aiayn.data import memory_budget
from tests.cli_helpers import assert_user_error, run_cli


@pytest.fixture
def lines(tmp_path):
    def write(name: str, n: int, text: str = "1 2 3") -> str:
        path = tmp_path / name
        path.write_text(f"{text}\n" * n, encoding="utf-8")
        return str(path)
    return write


def test_a_beam_the_vocabulary_cannot_feed_is_refused_before_compiling(transformer_dir, no_loading, capsys):
    code, output = run_cli(["translate", "--model", transformer_dir, "--compile", "--beam", "1000"], capsys)
    assert_user_error(code, output, "beam=1000: each step keeps the 2 x beam best of the model's 128 target pieces")
    assert output.count("\n") == 1


@pytest.mark.parametrize("case, needle", [
    ("missing input", "no-such.txt"),
    ("prefix lines", "--target-prefix"),
    ("output in the model", "lies inside the model directory"),
    ("output is the input", "is also an input"),
    ("head without alignment", "--alignment-head chooses where --alignment's links come from: add --alignment"),
    ("min length", "min_length=5000"),
])
def test_translate_refuses_before_loading(case, needle, transformer_dir, lines, tmp_path, no_loading, capsys):
    source = lines("in.txt", 3)
    argv = {"missing input": ["--input", tmp_path / "no-such.txt"],
            "prefix lines": ["--input", source, "--target-prefix", lines("prefix.txt", 2)],
            "output in the model": ["--input", source, "--output", f"{transformer_dir}/out.txt"],
            "output is the input": ["--input", source, "--output", source],
            "head without alignment": ["--alignment-head", "1:1"],
            "min length": ["--min-length", "5000"]}[case]
    code, output = run_cli(["translate", "--model", transformer_dir, "--compile", *argv], capsys)
    assert_user_error(code, output, needle)


def test_evaluate_checks_the_compare_model_and_hyp_out_first(transformer_dir, lines, tmp_path, no_loading, capsys):
    src, ref = lines("src.txt", 3), lines("ref.txt", 3)
    code, output = run_cli(["evaluate", "--model", transformer_dir, "--src", src, "--ref", ref,
                            "--compare", tmp_path / "missing"], capsys)
    assert_user_error(code, output, f"{tmp_path / 'missing'}: no such directory; pass --model DIR")
    code, output = run_cli(["evaluate", "--model", transformer_dir, "--src", src, "--ref", ref,
                            "--hyp-out", src], capsys)
    assert_user_error(code, output, f"{src} is also an input")


def test_score_checks_its_output_first(transformer_dir, lines, no_loading, capsys):
    src = lines("src.txt", 2)
    code, output = run_cli(["score", "--model", transformer_dir, "--src", src, "--tgt", lines("tgt.txt", 2),
                            "--output", src], capsys)
    assert_user_error(code, output, f"{src} is also an input")


def test_attention_checks_layer_and_beam_first(transformer_dir, tmp_path, no_loading, capsys):
    out = tmp_path / "maps.json"
    code, output = run_cli(["attention", "--model", transformer_dir, "1 2", "--layer", "99", "--out", out], capsys)
    assert_user_error(code, output, "--layer 99 out of range: the model has")
    code, output = run_cli(["attention", "--model", transformer_dir, "1 2", "--beam", "1000", "--out", out], capsys)
    assert_user_error(code, output, "beam=1000")


# ---- the search's memory -------------------------------------------------------------------------------
def _free(monkeypatch, n_bytes: int) -> None:
    monkeypatch.setattr(memory_budget, "available_memory", lambda: n_bytes)


def test_a_search_that_cannot_fit_is_refused_before_loading(transformer_dir, lines, monkeypatch, no_loading,
                                                            capsys):
    _free(monkeypatch, 20_000_000)
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", lines("in.txt", 64), "--beam", "60",
                            "--batch-size", "64"], capsys)
    assert_user_error(code, output, "beam=60 x 64 sentences in a batch x ", "output tokens: the search would hold "
                      "its cache and scores", "more than the 20 MB this machine has free; lower beam (a beam of ")
    assert output.count("\n") == 1


def test_the_same_beam_for_one_sentence_is_not_refused(transformer_dir, lines, monkeypatch, capsys):
    _free(monkeypatch, 20_000_000)
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", lines("in.txt", 1), "--beam", "60",
                            "--batch-size", "64"], capsys)
    assert code == 0, output


def test_the_translator_refuses_by_the_real_lengths(transformer_dir, monkeypatch):
    """Through the Python API (no command line's lower bound): the longest source's subwords decide."""
    from aiayn.decoding.translator import Translator
    from aiayn.errors import AiaynError

    translator = Translator.from_pretrained(transformer_dir)
    long = " ".join(["1 2 3 4 5 6 7 8 9"] * 8)
    cfg, decode = translator.model.config, translator.decode_cfg
    short = 4  # "1" and </s>, in at most 4 subwords
    need = memory_budget.decoding_bytes(multi_head=True, layers=cfg.n_decoder_layers, d_model=cfg.d_model,
                                        vocab_size=cfg.tgt_vocab_size, rows=8 * 16, sentences=8, source_len=short,
                                        output_len=int(short * decode.max_len_a + decode.max_len_b))
    _free(monkeypatch, int(1.3 * need / memory_budget.MARGIN))  # room for short sentences, not for long ones
    translator.translate(["1"] * 8, beam=16, batch_size=8)
    with pytest.raises(AiaynError, match=r"^beam=16 x 8 sentences in a batch x \d+ output tokens"):
        translator.translate([long] * 8, beam=16, batch_size=8)


def test_decoding_bytes_counts_the_decoder_state_a_search_holds(transformer_dir):
    """The Transformer's cache after t steps of R rows, as the model's own state tensors hold it, equals
    decoding_bytes less its scores and the one layer it adds for the copy a growing cache makes."""
    import torch

    from aiayn.checkpoint import load_checkpoint

    model, _, _ = load_checkpoint(transformer_dir)
    B, S, t = 3, 7, 5
    src = torch.randint(4, 100, (B, S))
    state = model.init_state(model.encode(src)[0], src)
    tokens = torch.full((B,), 1)
    for _ in range(t):
        _, state, _ = model.decode_step(tokens, state)
    held = sum(c.self_kv.nbytes + c.cross_k.nbytes + c.cross_v.nbytes for c in state.layers)
    cfg = model.config
    total = memory_budget.decoding_bytes(multi_head=True, layers=cfg.n_decoder_layers, d_model=cfg.d_model,
                                         vocab_size=cfg.tgt_vocab_size, rows=B, sentences=B, source_len=S,
                                         output_len=t)
    assert total - 4 * (3 * B * cfg.tgt_vocab_size + 2 * B * t * cfg.d_model) == held


@pytest.mark.parametrize("argv, needle", [
    (["--alignment", "--alignment-head", "9:1"], "--alignment-head 9:1: no such head; the model has"),
    (["--alignment", "--alignment-head", "ranking.json"], "--alignment-head ranking.json: no such file"),
])
def test_an_alignment_head_is_checked_against_the_config_before_loading(argv, needle, transformer_dir, no_loading,
                                                                         capsys):
    code, output = run_cli(["translate", "--model", transformer_dir, "--compile", *argv], capsys)
    assert_user_error(code, output, needle)


def test_serve_checks_its_alignment_head_before_loading(transformer_dir, no_loading, capsys):
    pytest.importorskip("fastapi")
    code, output = run_cli(["serve", "--model", transformer_dir, "--alignment-head", "1:99"], capsys)
    assert_user_error(code, output, "--alignment-head 1:99: no such head")


@pytest.mark.parametrize("mode", [[], ["--ablate"]])
def test_heads_reads_its_sentence_files_before_loading(mode, transformer_dir, lines, tmp_path, no_loading, capsys):
    other = "--ref" if mode else "--tgt"
    code, output = run_cli(["heads", "--model", transformer_dir, *mode, "--src", lines("src.txt", 3),
                            other, lines("tgt.txt", 2)], capsys)
    assert_user_error(code, output, f"has 3 lines, {other}")
    code, output = run_cli(["heads", "--model", transformer_dir, *mode, "--src", lines("src.txt", 3),
                            other, tmp_path / "missing.txt"], capsys)
    assert_user_error(code, output, "missing.txt: file not found")


def test_heads_reads_its_gold_before_loading(transformer_dir, lines, tmp_path, no_loading, capsys):
    gold = tmp_path / "gold.txt"
    gold.write_text("0-0\n0-x\n0-0\n", encoding="utf-8")
    code, output = run_cli(["heads", "--model", transformer_dir, "--src", lines("src.txt", 3),
                            "--tgt", lines("tgt.txt", 3), "--gold", gold], capsys)
    assert_user_error(code, output, "gold.txt")

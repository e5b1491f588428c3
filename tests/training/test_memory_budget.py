"""Sizes bounded before they are built: a weight, batch or model too large for free memory, and a weight so
small that a corpus gives no pair, are refused in one line (exit 2) before any epoch or checkpoint exists.
Free memory is monkeypatched, so the tests need none."""

from pathlib import Path

import pytest

from aiayn.data import memory_budget
from aiayn.errors import ConfigError
from tests.cli_helpers import assert_user_error, run_cli

GB = 10**9
SMALL = ["data.vocab_size=64", "data.byte_fallback=false", "model.d_model=32", "model.d_ff=64",
         "model.n_encoder_layers=1", "model.n_decoder_layers=1", "train.max_tokens=512", "train.num_threads=1",
         "train.warmup_steps=2", "train.max_steps=2", "train.eval_every=2", "train.save_every=2",
         "train.average_last=1", "train.bleu_sentences=2"]


def write(path: Path, lines) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def train_args(tmp_path, weights, *extra):
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    german = ["eins", "zwei", "drei", "vier", "fuenf", "sechs", "sieben", "acht", "neun", "zehn"]
    pairs = [f"{a} {b}\t{c} {d}" for a, c in zip(words, german) for b, d in zip(words, german)]  # 100 pairs
    corpora = [f"{{tsv: {write(tmp_path / f'c{k}.tsv', pairs[: 100 - 40 * k])}, weight: {w}}}"
               for k, w in enumerate(weights)]
    sets = ["data.dataset=files", f"data.valid={write(tmp_path / 'valid.tsv', pairs[:3])}",
            f"data.corpora=[{', '.join(corpora)}]", *SMALL, *extra]
    return ["train", "--out", tmp_path / "run"] + [x for s in sets for x in ("--set", s)]


def free(monkeypatch, n_bytes):
    monkeypatch.setattr(memory_budget, "available_memory", lambda: n_bytes)


def assert_no_training(tmp_path):
    assert not list((tmp_path / "run").glob("checkpoints/*")), "a refused run left a checkpoint"
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_an_epoch_too_large_for_memory_names_the_weight(tmp_path, capsys, monkeypatch):
    free(monkeypatch, GB)
    code, output = run_cli(train_args(tmp_path, [1, 999999]), capsys)
    assert_user_error(code, output, "data.corpora[1].weight=999999", "60 million pairs", "than the 1 GB",
                      "give a weight under")
    assert len(output.strip().splitlines()) <= 2, output  # the threads line, then the refusal
    assert_no_training(tmp_path)


def test_a_weight_that_gives_no_pair_is_refused(tmp_path, capsys, monkeypatch):
    free(monkeypatch, 22 * GB)
    code, output = run_cli(train_args(tmp_path, [1, 0.001]), capsys)
    assert_user_error(code, output, "data.corpora[1].weight=0.001", "= 0 pairs", "at least 0.0167")
    assert_no_training(tmp_path)


def test_a_batch_too_large_for_memory_names_max_tokens(tmp_path, capsys, monkeypatch):
    free(monkeypatch, 50 * 10**6)
    code, output = run_cli(train_args(tmp_path, [200], "train.max_tokens=100000000"), capsys)
    assert_user_error(code, output, "train.max_tokens=100000000", "give train.max_tokens under")
    assert_no_training(tmp_path)


def test_a_model_too_large_for_memory_is_refused_before_it_is_built(tmp_path, capsys, monkeypatch):
    free(monkeypatch, 22 * GB)
    code, output = run_cli(train_args(tmp_path, [1], "model.d_model=16384", "model.d_ff=65536",
                                      "model.n_heads=8", "model.n_encoder_layers=12", "model.n_decoder_layers=12"),
                           capsys)
    assert_user_error(code, output, "the model would have", "billion parameters", "model.d_model")
    assert_no_training(tmp_path)


def test_a_normal_config_passes(tmp_path, capsys, monkeypatch):
    free(monkeypatch, 2 * GB)
    code, output = run_cli(train_args(tmp_path, [1, 0.5]), capsys)
    assert code == 0, output
    assert list((tmp_path / "run").glob("checkpoints/*"))


def test_the_epoch_rule_and_unknown_memory():
    memory_budget.check_epoch(["a"], [3000], [999999.0]) if memory_budget.available_memory() is None else None
    assert memory_budget.epoch_pair_counts([3000, 10], [0.5, 3.0]) == [1500, 30]
    with pytest.raises(ConfigError, match=r"data.corpora\[0\].weight=0.0001"):
        memory_budget.check_epoch(["data.corpora[0]"], [3000], [0.0001])


def test_available_memory_reads_this_machine():
    free_bytes = memory_budget.available_memory()
    assert free_bytes is None or free_bytes > 0

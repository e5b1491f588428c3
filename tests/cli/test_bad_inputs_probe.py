"""Cases from a hostile probe of the command line: bytes that are not UTF-8 on stdin and in argv, endless
stdin, blank lines, deeply nested YAML, a `latest` that is not a file, training data that max_len empties,
two trainings on one directory, an over-long sentence in `aiayn attention`."""

import io
import os
import shutil
import sys

import pytest

from aiayn.errors import AiaynError
from tests.cli_helpers import assert_user_error, run_cli

TINY = ["data.synthetic_train=200", "data.synthetic_valid=10", "data.vocab_size=64", "data.byte_fallback=false",
        "model.d_model=32",
        "model.d_ff=64", "train.max_tokens=512", "train.num_threads=1", "train.max_steps=2",
        "train.eval_every=2", "train.save_every=2", "train.average_last=1", "train.bleu_sentences=5"]


def stdin_bytes(monkeypatch, data: bytes, tty: bool = False):
    class Stdin(io.TextIOWrapper):
        def isatty(self):
            return tty

    monkeypatch.setattr(sys, "stdin", Stdin(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize("data, needle", [
    (b"forty five\n\xff\xfe nine\n", "<stdin>:2: bytes that are not UTF-8"),
    (b"\0" * 500_000, "<stdin>:1: line longer than"),  # like /dev/zero: no newline, no end
])
@pytest.mark.parametrize("mode", ["batch", "interactive"])
def test_bad_stdin_is_a_clear_error(transformer_dir, tmp_path, capsys, monkeypatch, data, needle, mode):
    stdin_bytes(monkeypatch, data, tty=mode == "interactive")
    extra = ["--output", tmp_path / "out.txt"] if mode == "batch" else []
    assert_user_error(*run_cli(["translate", "--model", transformer_dir, *extra], capsys), needle)
    assert not (tmp_path / "out.txt").exists()


def test_surrogates_from_argv_are_a_clear_error(transformer_dir, tmp_path, capsys):
    """Python turns argv bytes that are not UTF-8 into lone surrogates; sentencepiece raised a TypeError."""
    bad = b"forty \xff five".decode("utf-8", errors="surrogateescape")
    code, output = run_cli(["attention", "--model", transformer_dir, bad, "--out", tmp_path / "a.json"], capsys)
    assert_user_error(code, output, "not valid UTF-8")
    from aiayn.decoding.translator import Translator

    with pytest.raises(AiaynError, match="sentence 2: not valid UTF-8"):
        Translator.from_pretrained(transformer_dir).translate(["nine", bad])


def test_blank_lines_translate_to_blank_lines(transformer_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("forty five\n\n   \nnine\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--output",
                            tmp_path / "out.txt"], capsys)
    assert code == 0, output
    lines = (tmp_path / "out.txt").read_text().split("\n")
    assert len(lines) == 5 and lines[1] == lines[2] == "" and lines[0] and lines[3]


def _deep(levels: int = 5000) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.slow
def test_deeply_nested_yaml_is_a_clear_error(transformer_dir, tmp_path, capsys):
    config = tmp_path / "deep.yaml"
    config.write_text(f"model: {_deep()}\n")
    assert_user_error(*run_cli(["train", str(config), "--out", tmp_path / "run"], capsys), config, "nested")
    assert_user_error(*run_cli(["train", "--out", tmp_path / "run", "--set", f"model.d_model={_deep()}"],
                               capsys), "nested")
    assert not (tmp_path / "run").exists()
    model = tmp_path / "model"
    shutil.copytree(transformer_dir, model)
    (model / "config.yaml").write_text(f"model: {_deep()}\n")
    assert_user_error(*run_cli(["translate", "--model", model, "--input", "/dev/null"], capsys), "nested")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory"])
def test_latest_that_is_not_a_file_is_a_clear_error(transformer_dir, tmp_path, capsys, kind):
    run = tmp_path / "run"
    shutil.copytree(transformer_dir, run / "checkpoints" / "step_00000001")
    latest = run / "latest"
    if kind == "fifo":
        os.mkfifo(latest)  # reading it would wait forever for a writer
    elif kind == "directory":
        latest.mkdir()
    else:
        latest.symlink_to(kind)  # reading it would never end
    assert_user_error(*run_cli(["translate", "--model", run, "--input", "/dev/null"], capsys),
                      latest, "not a regular file")


def test_training_data_emptied_by_max_len_is_an_error(tmp_path, capsys):
    args = ["train", "--out", tmp_path / "run"] + [x for s in [*TINY, "data.max_len=1"] for x in ("--set", s)]
    assert_user_error(*run_cli(args, capsys), "data.max_len=1", "nothing is left to train on")


def test_two_trainings_on_one_directory(tmp_path, capsys):
    """The second would interleave checkpoints and metrics.jsonl rows with the first."""
    from aiayn.config import load_config
    from aiayn.training.run import prepare_run

    out = tmp_path / "run"
    first = prepare_run(load_config(None, TINY), out)
    args = ["train", "--out", out] + [x for s in TINY for x in ("--set", s)]
    assert_user_error(*run_cli(args, capsys), "in use by another aiayn train", out)
    first.run_lock.close()  # the first one ends
    assert prepare_run(load_config(None, TINY), out).progress.step == 0


@pytest.mark.slow
def test_attention_warns_when_it_cuts_the_sentence(transformer_dir, tmp_path, capsys):
    from aiayn.decoding.translator import Translator

    limit = Translator.from_pretrained(transformer_dir).max_positions
    code, output = run_cli(["attention", "--model", transformer_dir, " ".join(["nine"] * limit),
                            "--out", tmp_path / "a.json"], capsys)
    assert code == 0 and "warning" in output and "beginning" in output, output
    code, output = run_cli(["attention", "--model", transformer_dir, "nine", "--target", " ",
                            "--out", tmp_path / "b.json"], capsys)
    assert_user_error(code, output, "--target is empty")


def test_output_with_a_trailing_slash_and_a_cpu_index(transformer_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("nine\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--output",
                            f"{tmp_path}/out/"], capsys)
    assert_user_error(code, output, "names a directory")
    assert not (tmp_path / "out").exists()
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--device", "cpu:5"], capsys)
    assert_user_error(code, output, "cpu:5", "one CPU device")


def test_model_preset_from_set():
    from aiayn.config import ConfigError, load_config

    assert load_config(None, ["model.preset=paper-base"]).model.d_model == 512
    assert load_config(None, ["model.preset=paper-base", "model.d_model=256"]).model.d_model == 256
    with pytest.raises(ConfigError, match="unknown model preset ''; choose one of"):
        load_config(None, ["model.preset="])


@pytest.mark.slow
def test_png_of_a_long_sentence_stays_bounded(transformer_dir, tmp_path, capsys):
    """A 400-token sentence with --kind all asked matplotlib for an 80,000-pixel canvas: 9 GB, or a crash."""
    pytest.importorskip("matplotlib")
    from PIL import Image

    from aiayn.inspect.maps.png import MAX_PIXELS

    text = " ".join(["forty five"] * 120)
    code, output = run_cli(["attention", "--model", transformer_dir, text, "--target", text, "--kind", "all",
                            "--out", tmp_path / "a.png"], capsys)
    assert code == 0, output
    with Image.open(tmp_path / "a.png") as image:
        assert image.width * image.height <= MAX_PIXELS * 1.05  # tight_layout may round up


def test_empty_tokenizer_file_is_named(transformer_dir, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(transformer_dir, model)
    (model / "tokenizer.model").write_bytes(b"")
    code, output = run_cli(["translate", "--model", model, "--input", "/dev/null"], capsys)
    assert_user_error(code, output, "tokenizer.model: empty file")


def test_training_corpus_that_is_a_fifo_is_refused(tmp_path, capsys):
    """A FIFO without a writer made `aiayn train` hang in open(); training reads its files more than once."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "ok.txt").write_text("one\n")
    files = ["data.dataset=files", f"data.train_src={fifo}", f"data.train_tgt={tmp_path}/ok.txt",
             f"data.valid_src={tmp_path}/ok.txt", f"data.valid_tgt={tmp_path}/ok.txt"]
    args = ["train", "--out", tmp_path / "run"] + [x for s in [*TINY, *files] for x in ("--set", s)]
    assert_user_error(*run_cli(args, capsys), fifo, "not a regular file")


def test_damaged_encoded_corpus_is_encoded_again(tmp_path, caplog):
    """RUN/encoded/<hash>/ is aiayn's cache: a damaged file (here the same size, other bytes) is found by its
    hash and the cache rebuilt, instead of training on wrong ids."""
    from aiayn.config import load_config
    from aiayn.training.run import prepare_run

    first = prepare_run(load_config(None, TINY), tmp_path / "run")
    expected = [first.train_examples[i] for i in range(len(first.train_examples))]
    first.run_lock.close()
    (entry,) = (tmp_path / "run" / "encoded").iterdir()
    data = bytearray((entry / "src.bin").read_bytes())
    data[:8] = b"\xff" * 8
    (entry / "src.bin").write_bytes(bytes(data))
    again = prepare_run(load_config(None, TINY), tmp_path / "run")
    assert "damaged" in caplog.text
    assert [again.train_examples[i] for i in range(len(again.train_examples))] == expected

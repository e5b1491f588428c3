"""Bad configs, corpora and inspection/evaluation requests on the command line: each case exits with code 2
and a one-line error (no traceback) naming the file, line, field or option, before any training step,
and leaves every file outside the intended output exactly as it was.

Output, checkpoint and decoding cases are in test_bad_inputs.py."""

import gzip
import hashlib
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

TRAIN = [("one", "eins"), ("two", "zwei"), ("three", "drei"), ("four", "vier")] * 15
TRUNCATED_GZ = gzip.compress(b"".join(b"sentence %d\n" % i for i in range(3000)))[:2000]
LONG_LINE_FILE = "two\n" + "x" * 100_001 + "\none\n"
FAST = ["data.vocab_size=30", "data.byte_fallback=false",
        "model.d_model=32", "model.d_ff=64", "train.max_tokens=512", "train.max_steps=4",
        "train.warmup_steps=2", "train.bleu_sentences=4"]


def tree_digest(*roots: Path) -> dict:
    """{path: sha256} of every file under the roots ("dir" for a directory)."""
    out = {}
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return out


@pytest.fixture
def ws(tmp_path):
    """A small aligned corpus: train.en/.de (60 lines), valid.en/.de (3 lines)."""
    (tmp_path / "train.en").write_text("".join(f"{s}\n" for s, _ in TRAIN))
    (tmp_path / "train.de").write_text("".join(f"{t}\n" for _, t in TRAIN))
    (tmp_path / "valid.en").write_text("two\nfour\none\n")
    (tmp_path / "valid.de").write_text("zwei\nvier\neins\n")
    return tmp_path


def write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def train(ws, *sets, config=None, **files) -> list:
    """`aiayn train [CONFIG] --out ws/out --set ...` on the files dataset; files= replaces a corpus path."""
    paths = {"train_src": "train.en", "train_tgt": "train.de", "valid_src": "valid.en", "valid_tgt": "valid.de",
             **files}
    data = ["data.dataset=files"] + [f"data.{k}={ws / v}" for k, v in paths.items()]
    argv = ["train"] + ([config] if config else []) + ["--out", ws / "out"]
    return argv + [x for s in [*data, *FAST, *sets] for x in ("--set", s)]


def mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def config(ws, content: str | bytes, name: str = "c.yaml") -> Path:
    return write(ws / name, content)


def assert_refused(code, output, needles):
    assert code == 2, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if "error:" in line]
    assert len(lines) == 1, output
    for needle in needles:
        assert str(needle) in lines[0], f"{needle!r} not in: {output}"


# (id, argv builder run in the workspace before hashing it, what the one-line error must name)
CONFIG_CASES = [
    ("log_every=0", lambda ws: train(ws, "train.log_every=0"), ["--set", "train.log_every=0 must be >= 1"]),
    ("n_heads=0", lambda ws: train(ws, "model.n_heads=0"), ["model.n_heads=0 must be >= 1"]),
    ("num_threads<0", lambda ws: train(ws, "train.num_threads=-1"), ["train.num_threads=-1"]),
    ("vocab_size=0", lambda ws: train(ws, "data.vocab_size=0"), ["data.vocab_size=0"]),
    ("lr_factor<0", lambda ws: train(ws, "train.lr_factor=-1"), ["train.lr_factor=-1.0 must be > 0"]),
    ("lr_factor nan", lambda ws: train(ws, "train.lr_factor=.nan"), ["train.lr_factor=nan", "finite"]),
    ("data.max_len=0", lambda ws: train(ws, "data.max_len=0"), ["data.max_len=0"]),
    ("max_minutes<0", lambda ws: train(ws, "train.max_minutes=-5"), ["train.max_minutes=-5.0"]),
    ("ema_decay=1", lambda ws: train(ws, "train.ema_decay=1"), ["train.ema_decay=1.0 must be in [0, 1)"]),
    ("adam_betas", lambda ws: train(ws, "train.adam_betas=[0.9, 2]"), ["train.adam_betas"]),
    ("length_penalty<0", lambda ws: train(ws, "decode.length_penalty=-1"), ["decode.length_penalty=-1.0"]),
    ("data.max_len>=model.max_len", lambda ws: train(ws, "model.max_len=64", "data.max_len=64"),
     ["data.max_len=64 must be < model.max_len=64"]),
    ("--set not YAML", lambda ws: train(ws, "train.max_steps=["), ["--set 'train.max_steps=['", "not valid YAML"]),
    ("--set unknown key", lambda ws: train(ws, "train.warmup=3"), ["--set", "did you mean train.warmup_steps"]),
    ("files without valid", lambda ws: train(ws, "data.valid_src=", "data.valid_tgt="), ["missing: data.valid_src"]),
    ("duplicate key", lambda ws: train(ws, config=config(ws, "train:\n  seed: 1\n  seed: 2\n")),
     ["c.yaml", "duplicate key 'seed' at line 3 (first at line 2)"]),
    ("scalar file", lambda ws: train(ws, config=config(ws, "5\n")), ["c.yaml", "expected a mapping"]),
    ("list file", lambda ws: train(ws, config=config(ws, "- a\n")), ["c.yaml", "got list"]),
    ("file is a directory", lambda ws: train(ws, config=mkdir(ws / "confdir")),
     ["confdir is a directory"]),
    ("file not UTF-8", lambda ws: train(ws, config=config(ws, b"train:\n  seed: 1 # \xe9t\xe9\n")),
     ["c.yaml", "not UTF-8"]),
    ("file missing", lambda ws: train(ws, config=ws / "nope.yaml"), ["nope.yaml", "does not exist"]),
    ("file unknown key", lambda ws: train(ws, config=config(ws, "train:\n  warmup: 3\n")),
     ["c.yaml", "unknown key train.warmup"]),
    ("file wrong type", lambda ws: train(ws, config=config(ws, "train:\n  max_steps: many\n")),
     ["c.yaml", "train.max_steps: expected int"]),
    ("file bad value", lambda ws: train(ws, config=config(ws, "train:\n  patience: -1\n")),
     ["c.yaml", "train.patience=-1 must be >= 0"]),
    ("file bad preset", lambda ws: train(ws, config=config(ws, "model:\n  preset: huge\n")),
     ["c.yaml", "unknown model preset 'huge'"]),
    ("file not YAML", lambda ws: train(ws, config=config(ws, "train: [1,\n")), ["c.yaml", "not valid YAML"]),
]

DATA_CASES = [
    ("corpus is a directory", lambda ws: train(ws, train_src=mkdir(ws / "d").name), ["d: is a directory"]),
    ("corpus missing", lambda ws: train(ws, valid_tgt="nope.de"), ["nope.de", "not found"]),
    ("corpus not UTF-8", lambda ws: train(ws, train_tgt=write(ws / "bad.de", b"eins\nzw\xe9i\n" * 30).name),
     ["bad.de:2", "not UTF-8"]),
    ("truncated .gz", lambda ws: train(ws, valid_src=write(ws / "v.en.gz", TRUNCATED_GZ).name),
     ["v.en.gz:", "damaged gzip file"]),
    ("not a .gz", lambda ws: train(ws, valid_src=write(ws / "v.en.gz", b"two\nfour\none\n").name),
     ["v.en.gz:1", "damaged gzip file"]),
    ("misaligned", lambda ws: train(ws, valid_tgt=write(ws / "v.de", "zwei\nvier\n").name),
     ["valid.en has 3 lines but", "v.de has 2"]),
    ("empty corpus", lambda ws: train(ws, valid_tgt=write(ws / "v.de", "").name), ["v.de", "empty"]),
    ("line over 100k characters", lambda ws: train(ws, valid_src=write(ws / "v.en", LONG_LINE_FILE).name),
     ["v.en:2", "longer than 100,000 characters"]),
    ("no newlines (/dev/zero)", lambda ws: train(ws, train_src="/dev/zero"), ["/dev/zero", "not a regular file"]),
]


@pytest.mark.parametrize("build, needles", [c[1:] for c in CONFIG_CASES + DATA_CASES],
                         ids=[c[0] for c in CONFIG_CASES + DATA_CASES])
def test_bad_config_or_corpus_stops_train_before_anything_is_written(ws, capsys, build, needles):
    argv = build(ws)
    before = tree_digest(ws)
    code, output = run_cli(argv, capsys)
    assert_refused(code, output, needles)
    assert tree_digest(ws) == before and not (ws / "out").exists()


def test_validation_line_no_model_can_take_is_found_before_training(ws, capsys):
    """A 100,000-character line passes the reader (its limit) but has far more subwords than the model's
    positions: training refuses it before the first step, not at the first evaluation."""
    long_line = " ".join(f"w{i}" for i in range(25_000))[:100_000]
    argv = train(ws, "model.max_len=256", "data.max_len=100",
                 valid_src=write(ws / "v.en", f"two\n{long_line}\none\n").name)
    before = tree_digest(ws)
    code, output = run_cli(argv, capsys)
    assert_refused(code, output, ["validation data (", "valid", "non-blank pair 2 has", "model.max_len=256"])
    assert {k: v for k, v in tree_digest(ws).items() if not k.startswith(str(ws / "out"))} == before
    assert not (ws / "out" / "checkpoints").exists() and not (ws / "out" / "metrics.jsonl").exists()


# ---- attention and evaluate ------------------------------------------------------------------------------
def attention(model_dir, out, *options) -> list:
    return ["attention", "--model", model_dir, "nine", "--beam", "1", "--out", out, *options]


@pytest.mark.parametrize("suffix", [".json", ".npz", ".align", ".png", ".html"])
@pytest.mark.parametrize("options, needle", [(["--layer", "9"], "--layer 9 out of range"),
                                              (["--head", "9"], "--head 9 out of range"),
                                              (["--layer", "-1"], "--layer -1 out of range"),
                                              (["--layer", "0"], "numbered 1 to 2")])
def test_attention_layer_or_head_out_of_range(transformer_dir, tmp_path, capsys, suffix, options, needle):
    before = tree_digest(tmp_path, transformer_dir)
    code, output = run_cli(attention(transformer_dir, tmp_path / f"a{suffix}", *options), capsys)
    assert_refused(code, output, [needle, "the model has"])
    assert tree_digest(tmp_path, transformer_dir) == before


@pytest.mark.parametrize("suffix", [".json", ".npz", ".align", ".png", ".html"])
def test_attention_kind_the_model_lacks(rnn_dir, tmp_path, capsys, suffix):
    before = tree_digest(tmp_path, rnn_dir)
    code, output = run_cli(attention(rnn_dir, tmp_path / f"a{suffix}", "--kind", "encoder_self"), capsys)
    assert_refused(code, output, ["encoder_self"])
    assert tree_digest(tmp_path, rnn_dir) == before


def test_attention_alignment_needs_cross_attention(transformer_dir, tmp_path, capsys):
    code, output = run_cli(attention(transformer_dir, tmp_path / "a.align", "--kind", "decoder_self"), capsys)
    assert_refused(code, output, ["a.align", "--kind cross"])
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("bootstrap", ["1", "99", "-1"])
def test_evaluate_bootstrap_too_small(transformer_dir, ws, capsys, bootstrap):
    argv = ["evaluate", "--model", transformer_dir, "--src", ws / "valid.en", "--ref", ws / "valid.de",
            "--bootstrap", bootstrap, "--hyp-out", ws / "hyp.txt"]
    before = tree_digest(ws, transformer_dir)
    code, output = run_cli(argv, capsys)
    assert_refused(code, output, [f"--bootstrap {bootstrap}", "0 turns it off"])
    assert {k: v for k, v in tree_digest(ws, transformer_dir).items() if not k.endswith("hyp.txt")} == before


@pytest.mark.parametrize("src, needles", [("empty.en", ["empty.en", "empty"]), ("d", ["d: is a directory"]),
                                          ("bad.en.gz", ["bad.en.gz:1", "damaged gzip"])])
def test_evaluate_and_translate_bad_input_files(transformer_dir, ws, capsys, src, needles):
    write(ws / "empty.en", "")
    write(ws / "bad.en.gz", b"not gzip\n")
    (ws / "d").mkdir()
    before = tree_digest(ws, transformer_dir)
    commands = [["evaluate", "--model", transformer_dir, "--src", ws / src, "--ref", ws / "valid.de"],
                ["translate", "--model", transformer_dir, "--input", ws / src, "--output", ws / "out.txt"]]
    for argv in commands[:1] if src == "empty.en" else commands:  # an empty input translates to an empty output
        code, output = run_cli(argv, capsys)
        assert_refused(code, output, needles)
    assert tree_digest(ws, transformer_dir) == before

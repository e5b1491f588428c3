"""Training runs against stray environments, planted links, interruptions and leftovers: each case fails
with one line (or is handled), and nothing a user made is touched."""

import io
import shutil
import socket
from pathlib import Path

import pytest
import torch
from cli_helpers import assert_user_error, run_cli

from aiayn.cli import main

TINY = ["data.synthetic_train=200", "data.synthetic_valid=10", "data.vocab_size=64", "data.byte_fallback=false",
        "model.d_model=32", "model.d_ff=64", "train.max_tokens=512", "train.num_threads=1", "train.warmup_steps=4",
        "train.eval_every=4", "train.save_every=4", "train.average_last=1", "train.bleu_sentences=5"]


def train_args(out, *extra):
    return ["train", "--out", out] + [x for s in [*TINY, *extra] for x in ("--set", s)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- distributed variables left in the environment ----------------------------------------------------
@pytest.mark.parametrize("variables, needles", [
    ({"WORLD_SIZE": "2"}, ["RANK is not set", "WORLD_SIZE=2", "torchrun"]),
    ({"WORLD_SIZE": "abc"}, ["WORLD_SIZE='abc' is not a whole number", "torchrun"]),
    ({"WORLD_SIZE": "2", "RANK": "0"}, ["MASTER_ADDR is not set", "RANK=0 WORLD_SIZE=2"]),
    ({"WORLD_SIZE": "2", "RANK": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}, ["RANK=3 is out of range"]),
])
def test_stray_world_size_is_one_line_naming_the_variables(tmp_path, capsys, monkeypatch, variables, needles):
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert_user_error(*run_cli(train_args(tmp_path / "run", "train.max_steps=2"), capsys), *needles)
    assert not (tmp_path / "run").exists()


def test_a_lone_rank_says_what_it_waits_for_and_gives_up(tmp_path, capsys, monkeypatch, caplog):
    """Every torchrun variable set, but no other process: the wait is named and ends at AIAYN_DIST_TIMEOUT."""
    port = _free_port()
    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                        "AIAYN_DIST_TIMEOUT": "1"}.items():
        monkeypatch.setenv(name, value)
    code, output = run_cli(train_args(tmp_path / "run", "train.max_steps=2"), capsys)
    assert_user_error(code, output, f"did not all meet at 127.0.0.1:{port} within 1 s", "AIAYN_DIST_TIMEOUT")
    assert f"waiting for 2 processes at 127.0.0.1:{port}" in caplog.text
    assert not (tmp_path / "run").exists()
    monkeypatch.setenv("AIAYN_DIST_TIMEOUT", "soon")
    assert_user_error(*run_cli(train_args(tmp_path / "run"), capsys), "AIAYN_DIST_TIMEOUT='soon'")


# ---- a damaged trainer_state.pt ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "run"
    assert main([str(a) for a in train_args(out, "train.max_steps=8")]) == 0
    return out


def _copy_run(trained_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run, symlinks=True)
    return run


def _pickled_code() -> bytes:
    buffer = io.BytesIO()
    torch.save({"progress": print}, buffer)  # a global that a weights_only load refuses
    return buffer.getvalue()


@pytest.mark.parametrize("content", [b"\x80garbage", _pickled_code()], ids=["garbage", "code"])
def test_damaged_trainer_state_is_one_clean_line(trained_run, tmp_path, capsys, caplog, content):
    run = _copy_run(trained_run, tmp_path)
    state = run / "checkpoints" / "step_00000008" / "trainer_state.pt"
    state.write_bytes(content)
    code, output = run_cli(train_args(run, "train.max_steps=8"), capsys)
    assert code == 0, output
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "\n" not in warning and str(state) in warning and "trying the checkpoint before it" in warning
    assert "weights_only" not in warning + output and "trust" not in warning + output
    assert "Warning" not in output


# ---- --init-from keeps its tokenizer ---------------------------------------------------------------------
@pytest.mark.parametrize("settings", [["data.vocab_size=100"], ["data.lowercase=true"], ["data.byte_fallback=false"],
                                      ["data.joint_vocab=false", "model.share_embeddings=false"]])
def test_a_tokenizer_setting_with_init_from_is_refused(transformer_dir, tmp_path, capsys, settings):
    """The tokenizer is --init-from's, as it is: a setting that would shape a new one has no effect, and would
    be recorded in the run's config.yaml as if it had."""
    argv = ["train", "--init-from", transformer_dir, "--out", tmp_path / "run", "--set", "train.max_steps=2"]
    argv += [x for s in settings for x in ("--set", s)]
    assert_user_error(*run_cli(argv, capsys), f"--set '{settings[0]}'", "--init-from", "drop this --set")
    assert not (tmp_path / "run").exists()

"""Training runs against stray environments, planted links, interruptions and leftovers: each case fails
with one line (or is handled), and nothing a user made is touched."""

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.cli import main
from tests.cli_helpers import assert_user_error, run_cli

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


@pytest.mark.slow
def test_a_lone_rank_says_what_it_waits_for_and_gives_up(tmp_path, capsys, monkeypatch, caplog):
    """Every torchrun variable set, but no other process: the wait is named and ends at AIAYN_DIST_TIMEOUT."""
    port = _free_port()
    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                        "AIAYN_DIST_TIMEOUT": "2"}.items():
        monkeypatch.setenv(name, value)
    code, output = run_cli(train_args(tmp_path / "run", "train.max_steps=2"), capsys)
    assert_user_error(code, output, f"did not all meet at 127.0.0.1:{port} within 2 s", "AIAYN_DIST_TIMEOUT")
    assert f"waiting for 2 processes at 127.0.0.1:{port}" in caplog.text, caplog.text  # after 1 s
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


# ---- a signal's checkpoint stays out of the average -------------------------------------------------------
AVERAGED = ["train.max_steps=20", "train.save_every=10", "train.eval_every=10", "train.average_last=2",
            "train.keep_last=2"]


def _averaged(run: Path) -> list[str]:
    return [Path(p).name for p in json.loads((run / "average" / "info.json").read_text())["averaged"]]


def test_interrupted_and_resumed_run_averages_what_an_uninterrupted_one_does(tmp_path, capsys, monkeypatch):
    """SIGTERM after update 13 saves step 13 (between save_every steps): the resumed run's average is of steps
    10 and 20, as the uninterrupted run's, bit for bit, and step 13 is gone once step 20 is saved."""
    from aiayn.training.adam import Adam

    assert main([str(a) for a in train_args(tmp_path / "whole", *AVERAGED)]) == 0
    original, calls = Adam.step, {"n": 0}

    def step_then_sigterm(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 13:
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(Adam, "step", step_then_sigterm)
    assert main([str(a) for a in train_args(tmp_path / "cut", *AVERAGED)]) == 143
    monkeypatch.setattr(Adam, "step", original)
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()) == ["step_00000010", "step_00000013"]
    assert main([str(a) for a in train_args(tmp_path / "cut", *AVERAGED)]) == 0
    capsys.readouterr()
    assert _averaged(tmp_path / "whole") == _averaged(tmp_path / "cut") == ["step_00000010", "step_00000020"]
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints").iterdir()) == ["step_00000010", "step_00000020"]
    whole, cut = (load_file(str(tmp_path / run / "average" / "model.safetensors")) for run in ("whole", "cut"))
    for name in whole:
        torch.testing.assert_close(cut[name], whole[name], rtol=0, atol=0, msg=name)


# ---- links planted at aiayn's names in a run --------------------------------------------------------------
def _digest(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else "dir" for p in sorted(root.rglob("*"))}


def _plant(run: Path, mine: Path) -> dict:
    """A link at each of aiayn's names, to a file or folder of the user's (copies of the run's own where the
    resume reads them)."""
    mine.mkdir()
    for name in ("config.yaml", "run.json", "tokenizer.model"):
        (mine / name).write_bytes((run / name).read_bytes())
    for name, text in (("metrics.jsonl", "my notes\n"), ("latest", "my list\n"), (".lock", "mine\n")):
        (mine / name).write_text(text)
    shutil.rmtree(run / "checkpoints" / "step_00000004")
    for name in ("best", "average", "encoded", "step_00000004"):
        (mine / name).mkdir()
        (mine / name / "kept.txt").write_text(f"my {name}\n")
    links = {**{name: name for name in ("config.yaml", "run.json", "tokenizer.model", "metrics.jsonl", "latest",
                                        ".lock", "best", "average", "encoded")},
             "checkpoints/step_00000004": "step_00000004"}
    for link, target in links.items():
        remove = shutil.rmtree if (run / link).is_dir() and not (run / link).is_symlink() else Path.unlink
        if (run / link).exists():
            remove(run / link)
        (run / link).symlink_to(mine / target)
    return links


def test_links_at_a_runs_names_are_replaced_never_written_through(trained_run, tmp_path, capsys):
    run, mine = _copy_run(trained_run, tmp_path), tmp_path / "mine"
    links = _plant(run, mine)
    before = _digest(mine)
    code, output = run_cli(train_args(run, "train.max_steps=12", "train.average_last=2"), capsys)
    assert code == 0, output
    assert _digest(mine) == before
    assert not any((run / link).is_symlink() for link in links if (run / link).exists())
    assert (run / "latest").read_text() == "step_00000012\n" and (run / "average" / "model.safetensors").is_file()
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 12


def test_a_link_at_checkpoints_is_refused_naming_it(trained_run, tmp_path, capsys):
    run, mine = _copy_run(trained_run, tmp_path), tmp_path / "mine"
    shutil.move(run / "checkpoints", mine)
    (run / "checkpoints").symlink_to(mine)
    before = _digest(mine)
    code, output = run_cli(train_args(run, "train.max_steps=12"), capsys)
    assert_user_error(code, output, f"{run / 'checkpoints'} is a symbolic link", "never through a link")
    assert _digest(mine) == before


# ---- temporaries of killed runs ----------------------------------------------------------------------------
KILLED_WHILE_ENCODING = """
import os, signal, sys
from aiayn.data import encoded
from aiayn.cli import main

def killed(pairs, tokenizer, max_len, tmp, source):
    (tmp / "src.bin").write_bytes(bytes(4096))  # a part of the corpus, then kill -9
    os.kill(os.getpid(), signal.SIGKILL)

encoded.write_encoded = killed
main(sys.argv[1:])
"""


def test_temporaries_of_a_killed_run_are_removed_by_the_next(tmp_path, capsys):
    run = tmp_path / "run"
    argv = [str(a) for a in train_args(run, "train.max_steps=4")]
    proc = subprocess.run([sys.executable, "-c", KILLED_WHILE_ENCODING, *argv], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (left,) = [p for p in (run / "encoded").iterdir() if p.name.endswith(".tmp")]
    assert (left / "src.bin").is_file()
    mine = [run / "encoded" / "notes.tmp", run / "encoded" / ".mine.tmp", run / ".notes.abcdefgh.tmp"]
    for path in mine:
        path.write_text("mine\n")
    (run / ".config.yaml.k3j4h5g6.tmp").write_text("half a config")  # a killed write of the run's own files
    code, output = run_cli(argv, capsys)
    assert code == 0, output
    assert not left.exists() and not (run / ".config.yaml.k3j4h5g6.tmp").exists()
    assert all(path.read_text() == "mine\n" for path in mine)
    (run / "checkpoints" / ".step_00000004.a1b2c3d4.tmp").mkdir()  # a checkpoint whose save was killed
    assert run_cli([*argv, "--set", "train.max_steps=8"], capsys)[0] == 0
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000004", "step_00000008"]


# ---- a large validation set -------------------------------------------------------------------------------
def test_a_large_validation_set_is_capped_with_a_warning(tmp_path, caplog):
    from aiayn.config import load_config
    from aiayn.training.run import prepare_run

    data = tmp_path / "data"
    data.mkdir()
    for split, count in (("train", 60), ("valid", 50)):
        (data / f"{split}.en").write_text("".join(f"one {i}\n" for i in range(count)))
        (data / f"{split}.de").write_text("".join(f"eins {i}\n" for i in range(count)))
    files = ["data.dataset=files", f"data.train_src={data}/train.en", f"data.train_tgt={data}/train.de",
             f"data.valid_src={data}/valid.en", f"data.valid_tgt={data}/valid.de", "data.vocab_size=30"]
    trainer = prepare_run(load_config(None, [*TINY, *files, "data.max_valid_pairs=20"]), tmp_path / "run")
    trainer.run_lock.close()
    assert len(trainer.valid_examples) == 20
    assert "50 pairs; validating on the first 20 (data.max_valid_pairs" in caplog.text
    caplog.clear()
    trainer = prepare_run(load_config(None, [*TINY, *files]), tmp_path / "whole")
    trainer.run_lock.close()
    assert len(trainer.valid_examples) == 50 and "max_valid_pairs" not in caplog.text

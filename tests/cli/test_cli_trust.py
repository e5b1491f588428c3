"""The command line under a user's mistakes and the world's faults: one line, never a traceback, nothing
lost. Bad options (one line, not argparse's usage block), Ctrl-C at any moment, a full disk for every
writer, errors that name the user's path (never aiayn's temporary name), an empty input."""

import errno
import gc
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiayn import io as aiayn_io
from aiayn.cli import main
from tests.cli_helpers import assert_user_error, run_cli
from tests.paths import REPO


# ---- bad options: one line --------------------------------------------------------------------------
@pytest.mark.parametrize("argv, expected", [
    (["translate", "--model", "m", "--beam", "2.5"],
     "aiayn translate: error: argument --beam: invalid int value: '2.5'"),
    (["translate", "--model", "m", "--sample", "--seed", "abc"],
     "aiayn translate: error: argument --seed: invalid int value: 'abc'"),
    (["translate", "--model", "m", "--length-penalty-form", "x"],
     "aiayn translate: error: argument --length-penalty-form: invalid choice: 'x' (choose from 'gnmt', 'hf')"),
    (["serve", "--model", "m", "--port", "0"],
     "aiayn serve: error: argument --port: '0' is not a port number (1-65535)"),
    (["translate"], "aiayn translate: error: the following arguments are required: --model"),
    (["evaluate", "--model", "m", "--bootstrap", "x"],
     "aiayn evaluate: error: argument --bootstrap: invalid int value: 'x'"),
    (["bogus"], "aiayn: error: argument COMMAND: invalid choice: 'bogus'"),
])
def test_a_bad_option_is_one_line_exit_2(argv, expected, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    captured = capsys.readouterr()
    assert stop.value.code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "usage:" not in captured.err, captured.err
    assert captured.err.startswith(expected), captured.err


def test_help_still_prints_everything(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["translate", "--help"])
    assert stop.value.code == 0
    assert "usage: aiayn translate" in capsys.readouterr().out


# ---- Ctrl-C at any moment -----------------------------------------------------------------------------
def _interrupt(argv, after: float, tmp_path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "aiayn", *argv], cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # a second one, as an impatient user presses it, while it leaves
    out, err = proc.communicate(input=b"ein Hund\n", timeout=120)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("after", [0.05, 0.3, 1.0])
@pytest.mark.parametrize("command", ["train", "translate"])
def test_ctrl_c_at_any_moment_is_interrupted_exit_130(command, after, tmp_path, transformer_dir):
    argv = (["train", "--out", tmp_path / "run", "--set", "train.max_steps=100000"] if command == "train"
            else ["translate", "--model", transformer_dir])
    code, err = _interrupt([str(a) for a in argv], after, tmp_path)
    if str(REPO / "aiayn") not in err and "Traceback" in err:  # the interpreter's own start (site's .pth imports,
        assert code != 0, err                                      # runpy) before any aiayn statement: not ours
        return
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert code in (130, -signal.SIGINT), (code, err)  # -SIGINT: killed before Python took the signal over


# ---- a full disk, for every writer ---------------------------------------------------------------------
def _full_file(tmp_path, name: str) -> Path:
    """A path with the given name that writes to /dev/full: every write fails with ENOSPC."""
    link = tmp_path / name
    link.symlink_to("/dev/full")
    return link


def test_translate_output_to_a_full_device(transformer_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("ein Hund\n", encoding="utf-8")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", source, "--output", "/dev/full"],
                           capsys)
    assert_user_error(code, output, "/dev/full: could not write it: no space left on the device")
    assert sum(" error: " in line for line in output.splitlines()) == 1  # (the untrained output's warnings aside)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".png", ".html", ".npz", ".json", ".align"])
def test_attention_out_on_a_full_disk(suffix, transformer_dir, tmp_path, capsys):
    if suffix == ".png":
        pytest.importorskip("PIL")
    out = _full_file(tmp_path, f"maps{suffix}")
    code, output = run_cli(["attention", "--model", transformer_dir, "ein Hund", "--out", out], capsys)
    assert_user_error(code, output, f"{out}: could not write it: no space left on the device")


def _full_disk_at_flush(monkeypatch):
    """Every directory aiayn writes fails as a full disk does, when its files are flushed."""
    def full(root):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(root / "model.safetensors"))

    monkeypatch.setattr(aiayn_io, "_fsync_tree", full)


def test_average_on_a_full_disk(transformer_dir, tmp_path, capsys, monkeypatch):
    _full_disk_at_flush(monkeypatch)
    out = tmp_path / "avg"
    code, output = run_cli(["average", transformer_dir, transformer_dir, "--out", out], capsys)
    assert_user_error(code, output, f"{out}: could not write it: no space left on the device; nothing was written")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_export_on_a_full_disk(transformer_dir, tmp_path, capsys, monkeypatch):
    pytest.importorskip("ctranslate2")
    _full_disk_at_flush(monkeypatch)
    out = tmp_path / "ct2"
    code, output = run_cli(["export", "--model", transformer_dir, "--out", out], capsys)
    assert_user_error(code, output, f"{out}: could not write it: no space left on the device")


def test_safetensors_full_disk_is_one_line(tmp_path):
    """safetensors writes in Rust and wraps the OSError in its own error, errno in the text only."""
    from safetensors import SafetensorError

    err = SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    with pytest.raises(aiayn_io.OutputError, match=r"^out: could not write it: no space left on the device; x$"):
        with aiayn_io.writing("out", "x"):
            raise err


class _FillingFile(io.FileIO):
    """A file on a disk with `room` bytes left: a write past it writes what fits, then fails with ENOSPC."""

    room = 1000

    def write(self, data) -> int:
        left = self.room - self.tell()
        if len(memoryview(data)) > left:
            super().write(memoryview(data)[:max(left, 0)])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().write(data)


def test_torch_save_on_a_filling_disk_raises_the_write_error(tmp_path):
    """torch's zip writer, whose write fails part way, says only 'unexpected pos'; save_torch raises the
    OSError."""
    import torch

    import aiayn.checkpoint as checkpoint

    with pytest.raises(RuntimeError, match="unexpected pos"):  # torch alone hides the cause
        torch.save({"x": torch.zeros(1000)}, _FillingFile(tmp_path / "a.pt", "wb"))
    with pytest.raises(OSError) as err:
        checkpoint.save_torch({"x": torch.zeros(1000)}, tmp_path / "b.pt", opener=lambda f: _FillingFile(f, "wb"))
    assert err.value.errno == errno.ENOSPC


def test_training_checkpoint_mid_run_on_a_full_disk(tmp_path, capsys, monkeypatch):
    """The second checkpoint's trainer_state.pt fills the disk part way: one line naming it and the first,
    nothing partial left, and the same command resumes from the first."""
    import aiayn.checkpoint as checkpoint

    real, calls = checkpoint.save_torch, []

    def save_torch(obj, file, **kwargs):
        calls.append(1)
        opener = _FillingFile if len(calls) == 2 else io.FileIO
        return real(obj, file, opener=lambda f: opener(f, "wb"))

    monkeypatch.setattr(checkpoint, "save_torch", save_torch)
    out = tmp_path / "run"
    argv = ["train", "--out", out, "--set", "train.max_steps=4", "--set", "train.save_every=1",
            "--set", "train.eval_every=100"]
    code, output = run_cli(argv, capsys)
    first = out / "checkpoints" / "step_00000001"
    assert_user_error(code, output, f"{out / 'checkpoints' / 'step_00000002'}: could not write it: no space left "
                      f"on the device", f"the last good checkpoint, {first}, is intact")
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_00000001"]  # no temporary left
    monkeypatch.undo()
    gc.collect()  # the failed run's trainer, in reference cycles with its error's frames, holds the run's lock
    code, output = run_cli(argv, capsys)
    assert code == 0 and f"resuming from {first} (step 1)" in output, output


def test_training_first_checkpoint_on_a_full_disk(tmp_path, capsys, monkeypatch):
    _full_disk_at_flush(monkeypatch)
    code, output = run_cli(["train", "--out", tmp_path / "run", "--set", "train.max_steps=2"], capsys)
    assert_user_error(code, output, "no space left on the device")


# ---- the user's path, never aiayn's temporary name ------------------------------------------------------
def test_output_where_no_file_can_be_made_names_the_users_path(transformer_dir, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("ein Hund\n", encoding="utf-8")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", source, "--output", "/proc/version"],
                           capsys)
    assert_user_error(code, output, "/proc/version: could not write it: /proc takes no new files")
    assert ".tmp" not in output


def test_a_failed_write_names_the_users_path_not_the_temporary(transformer_dir, tmp_path, capsys, monkeypatch):
    """The directory vanishes while the output is written: the message names --output, not .out.txt.*.tmp."""
    source = tmp_path / "in.txt"
    source.write_text("ein Hund\n", encoding="utf-8")

    def vanished(path, mode):
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))

    monkeypatch.setattr(aiayn_io.os, "chmod", vanished)
    out = tmp_path / "out.txt"
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", source, "--output", out], capsys)
    assert_user_error(code, output, f"{out}: could not write it: No such file or directory; nothing was written")
    assert ".tmp" not in output


def test_a_file_where_the_encoded_corpus_goes(tmp_path, tokenizer):
    from aiayn.data.encoded import encoded_corpus

    (tmp_path / "encoded").write_text("mine\n", encoding="utf-8")
    with pytest.raises(aiayn_io.OutputError, match="encoded is a file where aiayn keeps its encoded corpus: "
                       "move it away"):
        encoded_corpus(lambda: iter(()), tokenizer, None, "x", tmp_path / "encoded")
    assert (tmp_path / "encoded").read_text(encoding="utf-8") == "mine\n"


# ---- an empty input -------------------------------------------------------------------------------------
def test_an_empty_input_file_is_an_empty_output(transformer_dir, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    out = tmp_path / "out.txt"
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", empty, "--output", out], capsys)
    assert code == 0, output
    assert out.read_bytes() == b""
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", empty], capsys)
    assert (code, output) == (0, "")


def test_evaluate_an_empty_test_set_says_nothing_can_be_scored(transformer_dir, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    code, output = run_cli(["evaluate", "--model", transformer_dir, "--src", empty, "--ref", empty], capsys)
    assert_user_error(code, output, f"{empty} is empty: there is nothing to translate and score")

"""train.tensorboard: a tiny run writes TensorBoard event files whose scalars, read back with tensorboard's
own reader, are the logged loss and lr at the logged steps (and the validation's, with an attention image);
a resumed run appends without writing a step twice."""

import json

import pytest

from aiayn.config import load_config
from aiayn.training.run import prepare_run

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

TINY = ["data.synthetic_train=200", "data.synthetic_valid=4", "data.vocab_size=48", "data.byte_fallback=false",
        "model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_encoder_layers=1", "model.n_decoder_layers=2",
        "train.max_tokens=256", "train.warmup_steps=2", "train.log_every=1", "train.eval_every=2", "train.save_every=2",
        "train.num_threads=1", "train.average_last=0", "train.tensorboard=true"]


def _train(out, steps: int) -> None:
    prepare_run(load_config(None, [*TINY, f"train.max_steps={steps}"]), out).train()


def _read(out):
    acc = event_accumulator.EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    return acc


def _metrics(out) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_event_files_hold_the_logged_scalars_and_attention_images(tmp_path):
    out = tmp_path / "run"
    _train(out, 3)
    assert list((out / "tensorboard").glob("events.out.tfevents*"))
    acc, rows = _read(out), _metrics(out)
    for key, tag in (("loss", "train/loss"), ("lr", "train/lr"), ("valid_loss", "valid/loss"),
                     ("valid_ppl", "valid/ppl")):
        logged = {r["step"]: r[key] for r in rows if key in r}
        events = {e.step: e.value for e in acc.Scalars(tag)}
        assert logged and events == pytest.approx(logged, rel=1e-6), tag
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3]
    images = acc.Tags()["images"]
    assert images == ["attention/cross_layer0", "attention/cross_layer1"]  # one per decoder layer
    assert [e.step for e in acc.Images("attention/cross_layer0")] == [2]


def test_a_resumed_run_appends_without_duplicated_steps(tmp_path):
    import shutil

    out = tmp_path / "run"
    _train(out, 3)  # checkpoints at steps 2 and 3; as if killed after logging step 3, before its checkpoint:
    shutil.rmtree(out / "checkpoints" / "step_00000003")
    (out / "latest").write_text("step_00000002\n", encoding="utf-8")
    _train(out, 5)  # resumes at 2: step 3 is logged again, and the earlier step 3 is purged
    steps = [e.step for e in _read(out).Scalars("train/loss")]
    assert steps == [1, 2, 3, 4, 5]


def test_a_missing_tensorboard_package_is_one_line(tmp_path, monkeypatch):
    import builtins

    from aiayn.errors import AiaynError

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(AiaynError, match=r"pip install 'aiayn\[tensorboard\]'") as err:
        prepare_run(load_config(None, [*TINY, "train.max_steps=1"]), tmp_path / "run")
    assert "\n" not in str(err.value) and not (tmp_path / "run").exists()


# ---- writes that fail ----------------------------------------------------------------------------------
def test_a_users_file_at_run_tensorboard_is_named_before_anything_is_written(tmp_path):
    from aiayn.errors import OutputError

    out = tmp_path / "run"
    out.mkdir()
    (out / "tensorboard").write_text("my notes\n", encoding="utf-8")
    with pytest.raises(OutputError, match=r"tensorboard is a file, not a folder: train.tensorboard=true writes its "
                                          r"event files in a folder of that name; move it away"):
        prepare_run(load_config(None, [*TINY, "train.max_steps=1"]), out)
    assert sorted(p.name for p in out.iterdir()) == ["tensorboard"]
    assert (out / "tensorboard").read_text(encoding="utf-8") == "my notes\n"


def _failing_writes(monkeypatch, *, after: int, errno_: int, half: bool):
    """tensorboard's writer writes its event file through LocalFileSystem._write (the first flush creates it,
    each later one appends); from the `after`-th call on, a write fails with errno_, having written half of
    its bytes when `half` (as a filling disk does) or nothing (a read-only folder)."""
    import os

    from tensorboard.compat.tensorflow_stub.io import gfile

    real, calls = gfile.LocalFileSystem._write, []

    def write(self, filename, file_content, mode):
        calls.append(1)
        if len(calls) < after:
            return real(self, filename, file_content, mode)
        if half:
            with open(filename, mode) as f:
                f.write(bytes(file_content)[: len(file_content) // 2])
        raise OSError(errno_, os.strerror(errno_), os.fsencode(filename))  # tensorboard's name is bytes

    monkeypatch.setattr(gfile.LocalFileSystem, "_write", write)


def _whole_records(file) -> bool:
    """The event file is a sequence of whole TFRecords (8-byte length, 4-byte CRC, data, 4-byte CRC)."""
    import struct

    data, at = file.read_bytes(), 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at: at + 8])
        at += 12 + length + 4
    return at == len(data)


def test_a_full_disk_in_the_writer_thread_is_one_line_and_the_run_resumes(tmp_path, monkeypatch, capsys):
    import errno
    import gc

    from aiayn.errors import OutputError

    out = tmp_path / "run"
    _train(out, 2)  # a checkpoint at step 2
    _failing_writes(monkeypatch, after=4, errno_=errno.ENOSPC, half=True)
    with pytest.raises(OutputError) as err:
        _train(out, 6)
    message = str(err.value)
    del err  # its traceback holds the trainer, and the trainer the run's lock
    gc.collect()
    assert message == (f"{out / 'tensorboard'}: could not write it: no space left on the device; training stopped; "
                       f"the last good checkpoint, {out / 'checkpoints' / 'step_00000002'}, is intact: free space "
                       f"(or set train.tensorboard=false) and resume with the same command")
    assert "Traceback" not in capsys.readouterr().err  # the writer thread's own traceback is not printed
    files = sorted((out / "tensorboard").glob("events.out.tfevents*"))
    assert len(files) == 2 and all(_whole_records(f) for f in files)  # the half record is cut away
    monkeypatch.undo()
    _train(out, 6)  # resumes from step 2
    assert [e.step for e in _read(out).Scalars("train/loss")] == [1, 2, 3, 4, 5, 6]


def test_a_read_only_folder_is_one_line_and_leaves_no_event_file(tmp_path, monkeypatch, capsys):
    import errno

    from aiayn.errors import OutputError

    out = tmp_path / "run"
    _failing_writes(monkeypatch, after=1, errno_=errno.EROFS, half=False)
    with pytest.raises(OutputError, match=r"tensorboard: could not write it: the file system is read-only; training "
                                          r"stopped before its first checkpoint: fix that \(or set "
                                          r"train.tensorboard=false\) and run the same command again$"):
        _train(out, 2)
    printed = capsys.readouterr().err
    assert "Traceback" not in printed and "b'" not in printed
    assert not list((out / "tensorboard").glob("events.out.tfevents*"))

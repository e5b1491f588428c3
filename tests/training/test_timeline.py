"""train.attention_timeline: one NPZ of attention maps per validation under RUN/timeline/, thinned to a cap on
an even grid of steps, equal after an interrupted-then-resumed run; the server's /api/timeline reads them."""

import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from aiayn.run_dir import snapshot_steps
from aiayn.training.timeline import kept_steps

TINY = ["data.synthetic_train=200", "data.synthetic_valid=6", "data.vocab_size=48", "data.byte_fallback=false",
        "model.d_model=32", "model.d_ff=64", "model.n_heads=2", "train.max_tokens=512", "train.warmup_steps=4",
        "train.log_every=4", "train.bleu_sentences=4", "train.num_threads=1", "train.average_last=1",
        "train.keep_last=2", "train.max_steps=12", "train.save_every=4", "train.eval_every=2",
        "train.attention_timeline=2"]


def train(out: Path, extra=()) -> int:
    from aiayn.cli import main

    return main(["train", "--out", str(out)] + [x for s in TINY + list(extra) for x in ("--set", s)])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("timeline") / "run"
    assert train(out) == 0
    return out


def test_thinning_keeps_an_even_grid_and_the_latest():
    steps = []
    for step in range(10, 1001, 10):
        steps = kept_steps(steps + [step], step, eval_every=10, cap=8)
        assert len(steps) <= 8 and steps[-1] == step
    assert steps == [160, 320, 480, 640, 800, 960, 1000]
    gaps = np.diff(steps[:-1])
    assert (gaps == gaps[0]).all()


def test_each_validation_writes_the_models_maps(uninterrupted):
    from aiayn.checkpoint import load_checkpoint

    directory = uninterrupted / "timeline"
    assert snapshot_steps(directory) == [2, 4, 6, 8, 10, 12]
    model = load_checkpoint(uninterrupted / "checkpoints" / "step_00000012")[0].eval()
    with np.load(directory / "step_00000012.npz") as snap:
        assert int(snap["step"]) == 12 and {"cross_0", "encoder_self_1", "decoder_self_1"} <= set(snap.files)
        with torch.no_grad():
            src, tgt_in = torch.from_numpy(snap["src_0"])[None], torch.from_numpy(snap["tgt_0"])[None]
            _, maps = model(src, tgt_in, return_attention=True)
        for kind in ("cross", "encoder_self", "decoder_self"):
            np.testing.assert_array_equal(snap[f"{kind}_0"], maps[kind][0].numpy())
        assert snap["cross_0"].shape == (2, 2, len(snap["tgt_0"]), len(snap["src_0"]))


def test_interrupted_then_resumed_timeline_equals_uninterrupted(tmp_path, uninterrupted, monkeypatch):
    """SIGINT after step 5's update (saved at step 5), then resumed: the same files, byte for byte."""
    from aiayn.training.adam import Adam

    calls, original = {"n": 0}, Adam.step

    def step_then_signal(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(Adam, "step", step_then_signal)
    assert train(tmp_path / "b") == 130
    monkeypatch.setattr(Adam, "step", original)
    assert snapshot_steps(tmp_path / "b" / "timeline") == [2, 4]
    (tmp_path / "b" / "timeline" / "step_00000006.npz").write_bytes(b"left by a killed run")  # removed on resume
    assert train(tmp_path / "b") == 0
    a, b = uninterrupted / "timeline", tmp_path / "b" / "timeline"
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    for path in a.iterdir():
        assert path.read_bytes() == (b / path.name).read_bytes(), path.name

"""Weights that are not numbers: NaN or infinite values in a checkpoint load without complaint and translate
every sentence to one word. Every reader of weights refuses them in one line naming the file and the tensor
(checkpoint.read_weights; import-hf in test_interop_marian.py)."""

import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from aiayn.checkpoint import CheckpointError, check_finite, load_checkpoint
from tests.cli_helpers import assert_user_error, run_cli

TENSOR = "decoder_layers.1.ffn.w_2.weight"


def _poison(file, value: float, name: str = TENSOR) -> None:
    with safe_open(str(file), "pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(file))
    tensors[name][3, 5] = value
    save_file(tensors, str(file), metadata=metadata)


@pytest.fixture
def model(tmp_path, transformer_dir):
    return shutil.copytree(transformer_dir, tmp_path / "model")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_translate_refuses_nan_or_infinite_weights(model, tmp_path, capsys, value):
    _poison(model / "model.safetensors", value)
    src = tmp_path / "in.txt"
    src.write_text("forty five\n")
    code, output = run_cli(["translate", "--model", model, "--input", src], capsys)
    assert_user_error(code, output, f"{model / 'model.safetensors'}: tensor {TENSOR} holds 1 NaN or infinite value",
                      "use another checkpoint")
    assert len(output.strip().splitlines()) == 1


def test_ema_weights_and_averaging_are_checked_too(model, tmp_path, capsys):
    tensors = {k: v.clone() for k, v in load_checkpoint(model)[0].state_dict().items()}
    save_file(tensors, str(model / "ema.safetensors"))
    load_checkpoint(model, use_ema=True)  # finite: loads
    _poison(model / "ema.safetensors", float("nan"))
    with pytest.raises(CheckpointError, match=f"ema.safetensors: tensor {TENSOR} holds 1 NaN"):
        load_checkpoint(model, use_ema=True)
    load_checkpoint(model)  # the plain weights are fine
    other = shutil.copytree(model, tmp_path / "other")
    _poison(other / "model.safetensors", float("inf"))
    code, output = run_cli(["average", model, other, "--out", tmp_path / "avg"], capsys)
    assert_user_error(code, output, f"{other / 'model.safetensors'}: tensor {TENSOR}")
    assert not (tmp_path / "avg").exists()


def test_the_check_reads_every_floating_tensor_and_ignores_integers():
    check_finite({"ids": torch.tensor([1, 2]), "w": torch.ones(3), "h": torch.ones(2, dtype=torch.float16)}, "f")
    big = torch.full((4,), 3e38)  # its sum overflows, its values are finite: looked at element by element
    check_finite({"big": big}, "f")
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        bad = torch.ones(5, dtype=dtype)
        bad[2] = float("nan")
        with pytest.raises(CheckpointError, match="f: tensor bad holds 1 NaN or infinite value"):
            check_finite({"ok": torch.ones(2), "bad": bad}, "f")

"""Checkpoints: one directory each, written under a temporary name and renamed into place.

    model.safetensors   weights only (safe to share; tied weights stored once)
    config.yaml         the resolved experiment config
    tokenizer.model     the SentencePiece model
    trainer_state.pt    optimizer, scheduler, step, data position, every RNG state (weights_only load)
    ema.safetensors     EMA weights, when train.ema_decay > 0
    info.json           step, metrics, and for averages the checkpoints averaged
"""

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from aiayn.config import ExperimentConfig, config_from_dict, save_config
from aiayn.data.tokenizer import Tokenizer
from aiayn.model import build_model


class CheckpointError(ValueError):
    pass


def _replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished directory into place; an existing one is removed only after the rename."""
    if final.exists():
        old = final.with_name(f".{final.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def save_checkpoint(path: Path, model, cfg: ExperimentConfig, tokenizer: Tokenizer,
                    trainer_state: dict | None = None, ema: dict | None = None, info: dict | None = None):
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))
    save_config(cfg, tmp / "config.yaml")
    tokenizer.save(tmp / "tokenizer.model")
    if trainer_state is not None:
        torch.save(trainer_state, tmp / "trainer_state.pt")
    if ema is not None:
        save_file({k: v.contiguous() for k, v in ema.items()}, str(tmp / "ema.safetensors"))
    (tmp / "info.json").write_text(json.dumps(info or {}, indent=2), encoding="utf-8")
    _replace_dir(tmp, path)


def _require(path: Path, name: str) -> Path:
    if not (path / name).exists():
        raise CheckpointError(f"{path}: no {name}; is this an aiayn checkpoint directory "
                              f"(model.safetensors, config.yaml, tokenizer.model)?")
    return path / name


def load_config_file(path: Path) -> ExperimentConfig:
    import yaml

    return config_from_dict(yaml.safe_load(_require(path, "config.yaml").read_text(encoding="utf-8")),
                            str(path / "config.yaml"))


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu", use_ema: bool = False):
    """-> (model in eval mode, config, tokenizer)."""
    path = Path(path)
    cfg = load_config_file(path)
    tokenizer = Tokenizer.load(_require(path, "tokenizer.model"))
    model = build_model(cfg.model)
    if use_ema and (path / "ema.safetensors").exists():  # a full state dict (tied names included), fp32
        ema = load_file(str(path / "ema.safetensors"))
        model.load_state_dict({k: v.to(model.state_dict()[k].dtype) for k, v in ema.items()}, strict=True)
    else:
        load_model(model, str(_require(path, "model.safetensors")), strict=True)
    return model.to(device).eval(), cfg, tokenizer


def load_trainer_state(path: Path) -> dict:
    return torch.load(_require(Path(path), "trainer_state.pt"), weights_only=True)


def average_checkpoints(paths: list[Path], out: Path) -> Path:
    """Element-wise mean of the weights of several checkpoints of one model (§6.1: last 5)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    paths = [Path(p) for p in paths]
    total = None
    for p in paths:
        weights = load_file(str(_require(p, "model.safetensors")))
        if total is None:
            total = {k: v.double() for k, v in weights.items()}
        elif weights.keys() != total.keys():
            raise CheckpointError(f"{p}: its tensors differ from {paths[0]}'s; only checkpoints of one model "
                                  f"can be averaged")
        else:
            for k, v in weights.items():
                total[k] += v.double()
    model, cfg, tokenizer = load_checkpoint(paths[-1])
    averaged = {k: (v / len(paths)).to(model.state_dict()[k].dtype) for k, v in total.items()}
    model.load_state_dict(averaged, strict=False)
    save_checkpoint(out, model, cfg, tokenizer, info={"averaged": [str(p.resolve()) for p in paths]})
    return Path(out)

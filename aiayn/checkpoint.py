"""Checkpoint directories: saving, loading (with consistency checks), averaging. Which checkpoint a run
directory means is aiayn.run_dir's. Training, decoding, export and inspection all import this module; it
imports nothing from them. Files are written through aiayn.io.

A checkpoint is a directory, written under a unique temporary name and renamed into place:

    model.safetensors   weights only (safe to share; tied weights stored once); its header metadata
                        holds the model config it was saved with, checked against config.yaml on load
    config.yaml         the resolved experiment config
    tokenizer.model     the SentencePiece model (aiayn's own joint vocabulary), or instead, for imported
                        Marian models, source.spm, target.spm, vocab.json [target_vocab.json] and
                        tokenizer_config.json (aiayn.data.separate_tokenizer)
    trainer_state.pt    optimizer, scheduler, step, data position, every RNG state (weights_only load)
    ema.safetensors     EMA weights, when train.ema_decay > 0
    info.json           step, metrics; "output": "average" for directories made by averaging
"""

import contextlib
import dataclasses
import json
import logging
import warnings
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file, save_model

from aiayn import io
from aiayn.config import ExperimentConfig, config_from_dict
from aiayn.config_text import config_yaml, parse_yaml
from aiayn.data.tokenizer import TOKENIZER_FILES, Tokenizer, load_dir
from aiayn.errors import CheckpointError
from aiayn.io import atomic_dir
from aiayn.model import build_model

log = logging.getLogger(__name__)
EXPORT_MARKER = "aiayn_export.json"
THRESHOLDS_FILE = "thresholds.json"  # the model's own diagnostic thresholds (aiayn calibrate, end of training)


# ---- where outputs may go ---------------------------------------------------------------------------
def check_output_dir(out: str | Path, kind: str, force: bool = False, inputs=()) -> Path:
    """aiayn.io.check_output_dir for a model directory: aiayn's info.json or export marker tells its kind."""
    return io.check_output_dir(out, kind, force=force, inputs=inputs, markers=("info.json", EXPORT_MARKER),
                               written=_written_files)


def _written_files(out: Path) -> set[str]:
    """The names an aiayn output directory may hold: the checkpoint files, or the export's own list."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return set(json.loads((out / EXPORT_MARKER).read_text(encoding="utf-8"))["files"]) | {EXPORT_MARKER,
                                                                                              THRESHOLDS_FILE}
    return {"model.safetensors", "config.yaml", "trainer_state.pt", "ema.safetensors", "info.json",
            *TOKENIZER_FILES, "ct2", THRESHOLDS_FILE}  # ct2: the CTranslate2 engine's cache (aiayn.decoding.ct2_engine)


# ---- save and load -----------------------------------------------------------------------------------
def _model_metadata(cfg: ExperimentConfig) -> dict:
    return {"aiayn_model_config": json.dumps(dataclasses.asdict(cfg.model), sort_keys=True)}


def save_checkpoint(path: str | Path, model, cfg: ExperimentConfig, tokenizer: Tokenizer,
                    trainer_state: dict | None = None, ema: dict | None = None, info: dict | None = None,
                    *, intact: str | None = None) -> Path:
    """Write a complete checkpoint directory atomically (replacing one at `path`: callers check first).
    intact: what a failed write leaves intact, in its error (default: the earlier directory, or nothing)."""
    with atomic_dir(path, intact=intact) as tmp:
        save_model(model, str(tmp / "model.safetensors"), metadata=_model_metadata(cfg))
        (tmp / "config.yaml").write_text(config_yaml(cfg), encoding="utf-8")
        for name, data in tokenizer.files().items():  # tokenizer.model, or the files of separate vocabularies
            (tmp / name).write_bytes(data)
        if trainer_state is not None:
            save_torch(trainer_state, tmp / "trainer_state.pt")
        if ema is not None:
            save_file({k: v.contiguous() for k, v in ema.items()}, str(tmp / "ema.safetensors"))
        (tmp / "info.json").write_text(json.dumps(info or {}, indent=2), encoding="utf-8")
    return Path(path)


class _KeptWriteError:
    """The file torch.save writes through, keeping what the first failed write said: torch's zip writer,
    when a write fails part way (a disk filling up), goes on and raises only "unexpected pos N vs M".
    It keeps the error's (errno, strerror), not the error: torch's native writer, which holds this file,
    would hold the error's frames (the caller's trainer among them) in a cycle the collector cannot see."""

    def __init__(self, file):
        self.file, self.error = file, None

    def write(self, data) -> int:
        try:
            return self.file.write(data)
        except OSError as err:
            self.error = self.error or (err.errno, err.strerror)
            raise

    def flush(self) -> None:
        self.file.flush()


def save_torch(obj, file: Path, *, opener=lambda file: open(file, "wb")) -> None:
    """torch.save into `file` (opened by `opener`), a write error (full disk, read-only) raised as an OSError
    naming `file`. Through a Python file: to a path torch says only "file write failed"."""
    with opener(file) as f:
        kept = _KeptWriteError(f)
        try:
            torch.save(obj, kept)
        except RuntimeError:
            if kept.error is None:
                raise
            raise OSError(*kept.error, str(file)) from None


def _require(path: Path, name: str) -> Path:
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a directory; give an aiayn checkpoint or training output directory")
    if not (path / name).is_file():
        raise CheckpointError(f"{path}: no {name}; is this an aiayn checkpoint directory "
                              f"(model.safetensors, config.yaml, tokenizer.model)?")
    return path / name


def load_config_file(path: Path) -> ExperimentConfig:
    file = _require(path, "config.yaml")
    try:
        values = parse_yaml(file.read_text(encoding="utf-8"), str(file), "; the checkpoint is damaged")
    except UnicodeDecodeError as err:
        raise CheckpointError(f"{file}: not UTF-8 ({err.reason}); the checkpoint is damaged") from None
    if not isinstance(values, dict):
        raise CheckpointError(f"{file}: expected a mapping of config sections, got {type(values).__name__}")
    return config_from_dict(values, str(file))


def load_tokenizer(path: Path) -> Tokenizer:
    """tokenizer.model, or separate source/target vocabularies (source.spm, target.spm, vocab.json)."""
    return load_dir(path) if (path / "vocab.json").is_file() else Tokenizer.load(_require(path, "tokenizer.model"))


def read_weights(file: Path) -> tuple[dict, dict]:
    """(tensors, header metadata) of a safetensors file, with a clear error for a damaged one or one holding
    NaN or infinite weights. Every reader of weights comes here (loading, EMA weights, averaging, resuming,
    --init-from)."""
    try:
        with safe_open(str(file), "pt") as f:
            metadata = f.metadata() or {}
        tensors = load_file(str(file))
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"{file}: not a readable safetensors file ({err}); the checkpoint is damaged "
                              f"or incomplete: use another checkpoint") from None
    check_finite(tensors, file)
    return tensors, metadata


def check_finite(tensors: dict, where) -> None:
    """Refuses NaN or infinite weights, naming the first such tensor: they load without complaint and
    translate every sentence to the same word. One pass: a finite sum proves every value finite (NaN and
    inf propagate through it); only a non-finite sum (a bad value, or an overflow) is looked at element by
    element. torch.isfinite(t).all() on every tensor cost 57 ms for a 4.9M-parameter model and 1.6 s for
    101M on 2 cores, the sums 1.1 ms and 34 ms."""
    for name, tensor in tensors.items():
        if not tensor.is_floating_point() or bool(torch.isfinite(tensor.sum())):
            continue
        bad = int(tensor.numel() - torch.isfinite(tensor).sum())
        if bad:
            raise CheckpointError(f"{where}: tensor {name} holds {bad} NaN or infinite value(s) of {tensor.numel()}; "
                                  f"the weights are damaged (a diverged training run?): use another checkpoint")


def _check_model_config(file: Path, metadata: dict, cfg: ExperimentConfig) -> None:
    """The model config stored in the weights' header must equal config.yaml's (it catches an edited
    n_heads, which changes no tensor shape but reinterprets every attention layer)."""
    saved = metadata.get("aiayn_model_config")
    if saved is None:  # checkpoints written before the metadata existed
        return
    saved, now = json.loads(saved), dataclasses.asdict(cfg.model)
    diff = [f"model.{k}: {saved[k]!r} in {file.name}, {now.get(k)!r} in config.yaml"
            for k in sorted(saved) if saved[k] != now.get(k)]
    if diff:
        raise CheckpointError(f"{file.parent}: config.yaml does not match the weights ({'; '.join(diff)}); "
                              f"restore the checkpoint's own config.yaml")


def _check_tokenizer(path: Path, cfg: ExperimentConfig, tokenizer: Tokenizer) -> None:
    m = cfg.model
    for name in ("src_vocab_size", "tgt_vocab_size"):
        if getattr(m, name) != getattr(tokenizer, name):
            raise CheckpointError(f"{path}: config.yaml has model.{name}={getattr(m, name)} but {tokenizer.name} "
                                  f"has {getattr(tokenizer, name)} pieces; they come from different models")
    if m.pad_id != tokenizer.pad_id:
        raise CheckpointError(f"{path}: config.yaml has model.pad_id={m.pad_id} but {tokenizer.name}'s pad id "
                              f"is {tokenizer.pad_id}; they come from different models")


def _load_weights(model, file: Path, tensors: dict) -> None:
    expected = model.state_dict()
    problems = [f"{k}: {tuple(v.shape)} in the file, {tuple(expected[k].shape)} in the model"
                for k, v in tensors.items() if k in expected and v.shape != expected[k].shape]
    missing = sorted(set(expected) - _names_covered(model, tensors))
    unexpected = sorted(set(tensors) - set(expected))
    problems += [f"{k}: missing from the file" for k in missing[:5]]
    problems += [f"{k}: in the file but not in the model" for k in unexpected[:5]]
    if problems:
        raise CheckpointError(f"{file}: weights do not fit the model of config.yaml ({'; '.join(problems[:6])})")
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in tensors.items()}, strict=False)


def _names_covered(model, tensors: dict) -> set[str]:
    """State-dict names the file provides, directly or through a tied tensor (save_model stores shared
    storage once, under one of its names)."""
    groups: dict = {}
    for name, tensor in model.state_dict().items():
        groups.setdefault((tensor.data_ptr(), tuple(tensor.shape)), []).append(name)
    return {n for names in groups.values() if any(n in tensors for n in names) for n in names}


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu", use_ema: bool = False):
    """-> (model in eval mode, config, tokenizer), after checking that the files belong together."""
    path = Path(path)
    cfg = load_config_file(path)
    tokenizer = load_tokenizer(path)
    _check_tokenizer(path, cfg, tokenizer)
    weights_file = _require(path, "model.safetensors")
    tensors, metadata = read_weights(weights_file)
    _check_model_config(weights_file, metadata, cfg)
    model = build_model(cfg.model)
    if use_ema and (path / "ema.safetensors").exists():  # a full state dict (tied names included), fp32
        tensors, _ = read_weights(path / "ema.safetensors")
    _load_weights(model, weights_file, tensors)
    return model.to(device).eval(), cfg, tokenizer


def load_trainer_state(path: Path) -> dict:
    """trainer_state.pt, loaded safely (weights_only): a damaged file, or one holding code, is one line
    naming it; torch's own message (which advises loading it unsafely) and warnings are not passed on."""
    file = _require(Path(path), "trainer_state.pt")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Detected pickle protocol 103" for a damaged file
            return torch.load(file, weights_only=True)
    except Exception as err:  # torch raises many types for a damaged file (EOFError, RuntimeError, pickle's)
        if str(err).startswith("Weights only load failed"):
            reason = "it holds objects other than the tensors and numbers aiayn saves, which are never loaded"
        else:
            reason = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:100]}".rstrip(": ")
        raise CheckpointError(f"{file}: damaged, or not a trainer state aiayn wrote ({reason})") from None


def average_checkpoints(paths: list[Path], out: Path, force: bool = False) -> Path:
    """Element-wise mean of the weights of several checkpoints of one model (§6.1: last 5)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    paths = [Path(p) for p in paths]
    check_output_dir(out, "average", force, inputs=paths)
    tokenizers = [load_tokenizer(p) for p in paths]
    if len({t.proto for t in tokenizers}) > 1:
        files = ", ".join(sorted({name for t in tokenizers for name in t.files()}))
        raise CheckpointError(f"the checkpoints have different tokenizer files ({files}); only checkpoints of one "
                              f"model (one run) can be averaged")
    total, first_config = None, None
    for p in paths:
        weights, metadata = read_weights(_require(p, "model.safetensors"))
        config = metadata.get("aiayn_model_config")
        if total is None:
            total, first_config = {k: v.double() for k, v in weights.items()}, config
        elif weights.keys() != total.keys() or any(v.shape != total[k].shape for k, v in weights.items()) \
                or (config and first_config and config != first_config):
            raise CheckpointError(f"{p}: its tensors differ from {paths[0]}'s; only checkpoints of one model "
                                  f"can be averaged")
        else:
            for k, v in weights.items():
                total[k] += v.double()
    model, cfg, tokenizer = load_checkpoint(paths[-1])
    averaged = {k: (v / len(paths)).to(model.state_dict()[k].dtype) for k, v in total.items()}
    model.load_state_dict(averaged, strict=False)
    save_checkpoint(out, model, cfg, tokenizer,
                    info={"output": "average", "averaged": [str(p.resolve()) for p in paths]})
    return Path(out)

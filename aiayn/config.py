"""Experiment configuration: typed dataclasses, YAML loading, dotted `--set` overrides, validation.

An unknown key is an error that names the nearest valid key; a value of the wrong type is an error
that names the field. The resolved config is saved (as YAML) in every checkpoint.
"""

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aiayn.errors import AiaynError
from aiayn.model.build import ModelConfig


class ConfigError(AiaynError):
    """A user mistake in a config file or override."""


@dataclass
class DataConfig:
    dataset: str = "synthetic"  # synthetic | multi30k | files
    src_lang: str = "en"
    tgt_lang: str = "de"
    data_dir: str = ""  # multi30k: local directory (else $AIAYN_MULTI30K_DIR, else download to cache)
    train_src: str = ""  # dataset: files
    train_tgt: str = ""
    valid_src: str = ""
    valid_tgt: str = ""
    valid_split: str = "val"
    vocab_size: int = 8000  # SentencePiece BPE, joint over both languages
    max_len: int = 128  # pairs longer than this (in subword tokens) are dropped from training and counted
    synthetic_train: int = 20000
    synthetic_valid: int = 300
    synthetic_seed: int = 1234


@dataclass
class TrainConfig:
    seed: int = 1
    max_tokens: int = 4096  # token budget of one micro-batch (source or target, whichever is larger)
    accumulate: int = 1  # micro-batches per optimizer step (per process)
    max_steps: int = 100000
    max_epochs: int = 1000
    max_minutes: float = 0.0  # stop (and finish normally) after this much wall time; 0 = no limit
    lr_factor: float = 1.0  # multiplies the Noam schedule
    warmup_steps: int = 4000  # §5.3
    adam_betas: tuple = (0.9, 0.98)  # §5.3
    adam_eps: float = 1e-9  # §5.3
    label_smoothing: float = 0.1  # §5.4
    clip_norm: float = 0.0  # 0 = no clipping (the paper clips nothing)
    bf16: bool = False  # bf16 autocast (CPU AMX or CUDA)
    eval_every: int = 500  # validation loss / perplexity
    bleu_every: int = 0  # dev BLEU by greedy decoding (0 = with every validation)
    bleu_sentences: int = 500
    save_every: int = 500
    keep_last: int = 5
    average_last: int = 5  # the paper averages the last 5 checkpoints
    patience: int = 0  # early stopping after this many validations without a better dev BLEU (0 = off)
    ema_decay: float = 0.0  # exponential moving average of the weights (0 = off)
    log_every: int = 50
    num_threads: int = 0  # torch CPU threads (0 = torch's default)


@dataclass
class DecodeConfig:
    beam: int = 4  # §6.1
    length_penalty: float = 0.6  # alpha (§6.1)
    max_len_a: float = 1.0  # maximum output length = a * source length + b
    max_len_b: int = 50  # §6.1: input length + 50


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=lambda: ModelConfig.preset("tiny"))
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)


def _coerce(value, annotation, where: str):
    """Check/convert a YAML value to the field's declared type."""
    if annotation is typing.Any:
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is tuple and isinstance(value, list):
        return tuple(value)
    if isinstance(annotation, type) and not isinstance(value, annotation):
        raise ConfigError(f"{where}: expected {annotation.__name__}, got {type(value).__name__} {value!r}")
    if isinstance(value, bool) and annotation in (int, float):
        raise ConfigError(f"{where}: expected {annotation.__name__}, got bool {value!r}")
    return value


def _apply(obj, values: dict, prefix: str, source: str):
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: section {prefix.rstrip('.') or '<top>'} must be a mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    hints = typing.get_type_hints(type(obj))
    for key, value in values.items():
        if key not in fields:
            near = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean {prefix}{near[0]}?" if near else f"; valid keys: {sorted(fields)}"
            raise ConfigError(f"{source}: unknown key {prefix}{key}{hint}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            _apply(current, value, f"{prefix}{key}.", source)
        else:
            setattr(obj, key, _coerce(value, hints[key], f"{source}: {prefix}{key}"))


def _parse_override(item: str) -> tuple[list[str], object]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, for example train.max_steps=200")
    key, raw = item.split("=", 1)
    return key.strip().split("."), yaml.safe_load(raw) if raw != "" else ""


def _nest(path: list[str], value) -> dict:
    return {path[0]: value} if len(path) == 1 else {path[0]: _nest(path[1:], value)}


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> ExperimentConfig:
    """Defaults <- YAML file (if any) <- `--set` overrides; then validated."""
    cfg = ExperimentConfig()
    if path is not None:
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        try:
            values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {err}") from err
        preset = values.get("model", {}).pop("preset", None) if isinstance(values.get("model"), dict) else None
        if preset:
            cfg.model = ModelConfig.preset(preset)
        _apply(cfg, values, "", str(path))
    for item in overrides:
        keys, value = _parse_override(item)
        _apply(cfg, _nest(keys, value), "", "--set")
    return validate(cfg)


def validate(cfg: ExperimentConfig) -> ExperimentConfig:
    if cfg.data.dataset not in ("synthetic", "multi30k", "files"):
        raise ConfigError(f"data.dataset={cfg.data.dataset!r} must be synthetic, multi30k or files")
    if cfg.data.dataset == "files" and not (cfg.data.train_src and cfg.data.train_tgt):
        raise ConfigError("data.dataset=files needs data.train_src and data.train_tgt")
    for name in ("max_tokens", "accumulate", "max_steps", "warmup_steps", "eval_every", "save_every"):
        if getattr(cfg.train, name) < 1:
            raise ConfigError(f"train.{name}={getattr(cfg.train, name)} must be >= 1")
    if not 0 <= cfg.train.label_smoothing < 1:
        raise ConfigError(f"train.label_smoothing={cfg.train.label_smoothing} must be in [0, 1)")
    if cfg.decode.beam < 1:
        raise ConfigError(f"decode.beam={cfg.decode.beam} must be >= 1")
    try:
        cfg.model.validate()
    except ValueError as err:
        raise ConfigError(str(err)) from err
    return cfg


def to_dict(cfg) -> dict:
    def plain(v):
        return list(v) if isinstance(v, tuple) else v
    return {k: (to_dict(v) if dataclasses.is_dataclass(v) else plain(v)) for k, v in vars(cfg).items()}


def config_yaml(cfg: ExperimentConfig) -> str:
    """The config as YAML text (written to disk by aiayn.checkpoint's atomic helpers)."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)


def config_from_dict(values: dict, source: str = "config") -> ExperimentConfig:
    cfg = ExperimentConfig()
    _apply(cfg, values, "", source)
    return validate(cfg)



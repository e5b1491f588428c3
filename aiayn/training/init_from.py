"""`aiayn train --init-from DIR`: a new run's config with the model section of DIR's, and the --set items
that cannot apply to a model and tokenizer that are kept as they are refused, naming each."""

import dataclasses
import logging

from aiayn.config import ExperimentConfig, validate
from aiayn.config_text import parse_override
from aiayn.errors import ConfigError
from aiayn.model import ModelConfig

log = logging.getLogger(__name__)

# Model fields that only regularize training (they change neither the weights' shapes nor their meaning):
# a fine-tuning run may set them with --set although the model section comes from --init-from.
TRAINING_ONLY_MODEL_FIELDS = ("dropout", "attention_dropout")
# Data fields that shape a new run's tokenizer: with --init-from the tokenizer is DIR's, as it is, so a --set of
# one of them would be recorded in the run's config.yaml and have no effect.
TOKENIZER_DATA_FIELDS = ("vocab_size", "byte_fallback", "lowercase", "joint_vocab")


def inherit_model(cfg: ExperimentConfig, model: ModelConfig, overrides: list[str], source: str) -> ExperimentConfig:
    """`aiayn train --init-from DIR`: the model section is DIR's (`model`); the config file's own is replaced.
    A --set model.FIELD that differs from DIR's value is an error naming the field (model.dropout and
    model.attention_dropout may change), and so is a --set of a field that shapes the tokenizer
    (TOKENIZER_DATA_FIELDS: DIR's tokenizer is kept). Then the whole config is validated again."""
    kept = {}
    for item in overrides:
        keys, _ = parse_override(item)
        if keys[0] == "data" and ".".join(keys[1:]) in TOKENIZER_DATA_FIELDS:
            raise ConfigError(f"--set {item!r}: the tokenizer comes from --init-from {source} and is kept as it "
                              f"is; drop this --set ({', '.join('data.' + f for f in TOKENIZER_DATA_FIELDS)} "
                              f"shape a new tokenizer only)")
        if keys[0] != "model":
            continue
        name = ".".join(keys[1:])
        if name in TRAINING_ONLY_MODEL_FIELDS:
            kept[name] = getattr(cfg.model, name)
        elif name in ("", "preset") or getattr(cfg.model, name) != getattr(model, name):
            has = "" if name in ("", "preset") else f", which has model.{name}={getattr(model, name)!r}"
            raise ConfigError(f"--set {item!r}: the model comes from --init-from {source}{has}; drop this --set "
                              f"(only model.dropout and model.attention_dropout may change when fine-tuning)")
    differing = [f.name for f in dataclasses.fields(model) if getattr(cfg.model, f.name) != getattr(model, f.name)
                 and f.name not in kept]
    if differing:
        log.info("the model section comes from %s; the config's own is not used (it differs in %s)", source,
                 ", ".join(differing))
    cfg.model = dataclasses.replace(model, **kept)
    try:
        return validate(cfg)
    except ConfigError as err:
        raise ConfigError(f"with the model of --init-from {source}: {err}") from None

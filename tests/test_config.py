from pathlib import Path

import pytest

from aiayn.config import ConfigError, load_config, to_dict
from aiayn.model import build_model

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


def test_unknown_key_names_the_nearest(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  warmup_step: 10\n")
    with pytest.raises(ConfigError, match=r"unknown key train.warmup_step; did you mean train.warmup_steps\?"):
        load_config(path)
    with pytest.raises(ConfigError, match="did you mean model.d_model"):
        load_config(None, ["model.dmodel=3"])


def test_wrong_types_and_values_are_errors(tmp_path):
    with pytest.raises(ConfigError, match="train.max_steps: expected int"):
        load_config(None, ["train.max_steps=lots"])
    with pytest.raises(ConfigError, match="train.max_steps=0 must be >= 1"):
        load_config(None, ["train.max_steps=0"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["train.max_steps"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_overrides_and_floats():
    cfg = load_config(None, ["train.lr_factor=2", "model.n_heads=2", "data.dataset=synthetic"])
    assert cfg.train.lr_factor == 2.0 and isinstance(cfg.train.lr_factor, float) and cfg.model.n_heads == 2


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_loads_and_builds(path):
    cfg = load_config(path, ["model.src_vocab_size=64", "model.tgt_vocab_size=64"])
    model = build_model(cfg.model)
    assert sum(p.numel() for p in model.parameters()) > 0
    assert to_dict(cfg)["model"]["arch"] == cfg.model.arch


def test_shipped_configs_exist():
    names = {p.stem for p in CONFIGS}
    assert {"demo", "multi30k_de_en", "multi30k_en_de", "rnn_luong", "rnn_bahdanau", "paper_base"} <= names

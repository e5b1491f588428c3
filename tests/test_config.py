import re
from pathlib import Path

import pytest
import yaml

from aiayn.config import ConfigError, config_from_dict, load_config
from aiayn.config_text import _StrictLoader, to_dict
from aiayn.model import build_model
from tests.paths import REPO

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


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


@pytest.mark.parametrize("overrides, message", [
    (["train.schedule=inverse_sqrt"], "train.schedule=inverse_sqrt needs train.lr"),
    (["train.schedule=constant", "train.lr=0"], "train.schedule=constant needs train.lr"),
    (["train.lr=1e-4"], "train.lr=0.0001 is not used by train.schedule=noam"),
    (["train.schedule=cosine", "train.lr=1e-4"], "train.schedule='cosine' must be one of noam, inverse_sqrt"),
    (["train.schedule=inverse_sqrt", "train.lr=-1e-4"], "train.lr=-0.0001 must be >= 0"),
    (["train.schedule=linear", "train.lr=1e-3", "train.max_steps=100", "train.warmup_steps=100"],
     "train.schedule=linear decays the lr to 0 at train.max_steps=100, which must be after train.warmup_steps=100"),
])
def test_schedule_and_lr_must_agree(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, overrides)
    cfg = load_config(None, ["train.schedule=inverse_sqrt", "train.lr=5e-5"])
    assert cfg.train.schedule == "inverse_sqrt" and cfg.train.lr == 5e-5


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_loads_and_builds(path):
    cfg = load_config(path, ["model.src_vocab_size=64", "model.tgt_vocab_size=64"])
    model = build_model(cfg.model)
    assert sum(p.numel() for p in model.parameters()) > 0
    assert to_dict(cfg)["model"]["arch"] == cfg.model.arch


def test_shipped_configs_exist():
    names = {p.stem for p in CONFIGS}
    assert {"demo", "multi30k_de_en", "multi30k_en_de", "rnn_luong", "rnn_bahdanau", "paper_base"} <= names


# every numeric field has a rule; the error names the field and where it was set
BAD_VALUES = [
    ("train.log_every=0", "train.log_every=0 must be >= 1"), ("model.n_heads=0", "model.n_heads=0 must be >= 1"),
    ("train.num_threads=-1", "train.num_threads=-1 must be in [0, 1024]"),
    ("data.vocab_size=0", "data.vocab_size=0 must be >= 8"), ("train.lr_factor=-1", "train.lr_factor=-1.0 must be > 0"),
    ("data.max_len=0", "data.max_len=0 must be >= 1"), ("train.max_minutes=-1", "train.max_minutes=-1.0 must be >= 0"),
    ("train.keep_last=0", "train.keep_last=0 must be >= 1"), ("train.average_last=-1", "train.average_last=-1"),
    ("train.patience=-1", "train.patience=-1"), ("train.ema_decay=1", "train.ema_decay=1.0 must be in [0, 1)"),
    ("train.clip_norm=-0.5", "train.clip_norm=-0.5"), ("train.adam_eps=0", "train.adam_eps=0.0 must be > 0"),
    ("train.adam_betas=[0.9]", "train.adam_betas"), ("train.adam_betas=[0.9, 1.0]", "two numbers in [0, 1)"),
    ("train.adam_betas=[0.9, x]", "train.adam_betas"), ("train.bleu_sentences=0", "train.bleu_sentences=0"),
    ("train.bleu_every=-1", "train.bleu_every=-1"), ("train.max_epochs=0", "train.max_epochs=0"),
    ("train.seed=-1", "train.seed=-1"), ("data.synthetic_train=0", "data.synthetic_train=0"),
    ("data.synthetic_valid=600000", "data.synthetic_valid=600000"), ("data.synthetic_seed=-2", "synthetic_seed"),
    ("decode.length_penalty=-0.1", "decode.length_penalty=-0.1"), ("decode.length_penalty=.inf", "finite"),
    ("decode.length_penalty=2000", "decode.length_penalty"),
    ("decode.max_len_a=-1", "decode.max_len_a=-1.0"), ("decode.max_len_b=0", "decode.max_len_b=0"),
    ("decode.beam=0", "decode.beam=0"), ("model.d_model=0", "model.d_model=0"), ("model.d_ff=0", "model.d_ff=0"),
    ("model.n_encoder_layers=0", "model.n_encoder_layers=0"), ("model.n_decoder_layers=0", "n_decoder_layers=0"),
    ("model.max_len=1", "model.max_len=1 must be >= 2"), ("model.src_vocab_size=0", "model.src_vocab_size=0"),
    ("model.tgt_vocab_size=0", "model.tgt_vocab_size=0"), ("model.attention_dropout=1", "attention_dropout=1.0"),
    ("model.dropout=-0.1", "model.dropout=-0.1"), ("model.layer_norm_eps=0", "model.layer_norm_eps=0.0 must be > 0"),
    ("model.attention_dim=-1", "model.attention_dim=-1"), ("train.label_smoothing=.nan", "label_smoothing=nan"),
    ("train.lr_factor=.nan", "train.lr_factor=nan must be a finite number"), ("model.pad_id=-1", "model.pad_id"),
    ("model.d_model=30", "divisible by model.n_heads"), ("data.max_len=1024", "must be < model.max_len=1024"),
]


@pytest.mark.parametrize("override, needle", BAD_VALUES, ids=[o for o, _ in BAD_VALUES])
def test_every_numeric_field_is_checked_and_named(override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert needle in str(err.value) and str(err.value).startswith("--set")


def test_value_errors_name_the_file_where_the_value_was_set(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  preset: tiny\n  max_len: 64\ndata:\n  max_len: 100\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: data.max_len=100 must be < model.max_len=64"):
        load_config(path)
    path.write_text("train:\n  log_every: 0\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: train.log_every=0 must be >= 1"):
        load_config(path)
    assert load_config(path, ["train.log_every=3"]).train.log_every == 3  # the override wins, then checked
    path.write_text("model:\n  preset: huge\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: unknown model preset 'huge'"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"^from/run/config.yaml: model.n_heads=0"):
        config_from_dict({"model": {"n_heads": 0}}, "from/run/config.yaml")


def test_yaml_floats_without_a_dot_and_empty_sections_are_accepted(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  adam_eps: 1e-9\n  # lr_factor: 2\ndecode:\n")  # YAML 1.1 reads 1e-9 as text
    cfg = load_config(path, ["train.lr_factor=5e-1"])
    assert cfg.train.adam_eps == 1e-9 and cfg.train.lr_factor == 0.5


@pytest.mark.parametrize("text, needle", [
    ("train:\n  max_steps: 5\n  max_steps: 6\n", "duplicate key 'max_steps' at line 3 (first at line 2)"),
    ("train: {}\ntrain: {}\n", "duplicate key 'train'"),
    ("5\n", "expected a mapping of sections"), ("- a\n", "got list"),
    ("model: 3\n", "section model must be a mapping"), ("train: [1, 2\n", "not valid YAML"),
])
def test_bad_config_files_are_named(tmp_path, text, needle):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}") as err:
        load_config(path)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("base: &b {beam: 2, max_len_b: 10}\n")
    values = yaml.load(path.read_text() + "decode:\n  <<: *b\n  beam: 3\n", Loader=_StrictLoader)
    assert values["decode"] == {"beam": 3, "max_len_b": 10}


def test_unreadable_config_files(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(ConfigError, match="dir.yaml is a directory"):
        load_config(tmp_path / "dir.yaml")
    (tmp_path / "latin1.yaml").write_bytes("train:\n  seed: 1 # \xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="latin1.yaml: not UTF-8"):
        load_config(tmp_path / "latin1.yaml")


@pytest.mark.parametrize("override, needle", [
    ("train.max_steps=[", "--set 'train.max_steps=[': not valid YAML"), ("train.x.y=1", "unknown key train.x"),
    (".max_steps=1", "empty key"), ("train.max_steps={a: 1, a: 2}", "duplicate key 'a'"),
    ("model=3", "section model must be a mapping"),
])
def test_bad_overrides_are_named(override, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(None, [override])


def test_files_dataset_needs_all_four_paths():
    with pytest.raises(ConfigError, match=r"missing: data.valid_src, data.valid_tgt"):
        load_config(None, ["data.dataset=files", "data.train_src=a", "data.train_tgt=b"])
    with pytest.raises(ConfigError, match=r"data.valid_split='dev': Multi30k has"):
        load_config(None, ["data.dataset=multi30k", "data.valid_split=dev"])


def test_unreadable_config_file_is_named(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("train: {}\n")

    def denied(self, *args, **kwargs):  # chmod 000 does not stop root, who runs some CI
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ConfigError, match=r"c.yaml: cannot read it \(Permission denied\)"):
        load_config(path)

"""Every model and vocabulary choice docs/reference/config.md offers builds, trains (through a validation,
which translates the dev sentences), resumes, and translates from its saved directory without a traceback;
learned positions also export to CTranslate2 with the same outputs and are refused by export-hf in one line."""

from pathlib import Path

import pytest

from aiayn.cli import main
from tests.cli_helpers import assert_user_error, run_cli

TINY = ["data.synthetic_train=120", "data.synthetic_valid=4", "data.vocab_size=48", "data.byte_fallback=false",
        "model.d_model=16", "model.d_ff=32", "model.n_heads=2", "model.n_encoder_layers=1",
        "model.n_decoder_layers=1", "train.max_tokens=256", "train.warmup_steps=2", "train.log_every=2",
        "train.bleu_sentences=4", "train.num_threads=1", "train.average_last=1", "train.keep_last=1",
        "train.save_every=2", "train.eval_every=2"]
SOURCES = ["seventy two", "one hundred and five"]

SEPARATE = ["data.joint_vocab=false", "model.share_embeddings=false"]  # two vocabularies share no embedding
CHOICES = [  # one departure from the defaults each, as the config reference lists them
    ["model.positional=learned"], ["model.norm_first=true"], ["model.activation=gelu"],
    ["model.activation=silu"], ["model.share_embeddings=true"], ["model.tie_output=false"],
    ["model.output_bias=true"], ["model.attention_dropout=0.1"],
    ["model.arch=rnn", "model.rnn_cell=lstm", "model.rnn_attention=luong", "model.score=general"],
    ["model.arch=rnn", "model.rnn_cell=gru", "model.rnn_attention=bahdanau", "model.score=additive"],
    *[["model.arch=rnn", f"model.score={score}"] for score in ("dot", "scaled_dot", "concat", "cosine", "location")],
    SEPARATE, [*SEPARATE, "model.arch=rnn"], ["data.lowercase=true"],
    ["data.byte_fallback=true", "data.vocab_size=384"], ["data.dataset=coreference", "data.vocab_size=128"],
]


def train(out: Path, choice, steps: int = 2) -> Path:
    settings = TINY + list(choice) + [f"train.max_steps={steps}"]
    assert main(["train", "--out", str(out)] + [x for s in settings for x in ("--set", s)]) == 0
    return out / "best"


def translate(model_dir: Path, engine: str = "native") -> list[str]:
    from aiayn.decoding.translator import Translator

    return [r.text for r in Translator.from_pretrained(model_dir, engine=engine).translate(SOURCES, beam=1)]


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: ",".join(s.split(".", 1)[1] for s in c))
def test_each_documented_model_choice_trains_resumes_and_translates(tmp_path, choice, capsys):
    train(tmp_path / "run", choice)
    texts = translate(train(tmp_path / "run", choice, steps=4))
    assert "resuming from" in capsys.readouterr().out
    assert len(texts) == len(SOURCES) and all(isinstance(t, str) for t in texts)


@pytest.fixture(scope="module")
def learned(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("learned") / "run", ["model.positional=learned"])


def test_learned_positions_are_the_trained_table(learned):
    from aiayn.checkpoint import load_checkpoint

    model, _, _ = load_checkpoint(learned, "cpu")
    assert model.positional.kind == "learned"
    assert model.positional.table is model.positional.weight  # what decoding, export and the explorer read


def test_learned_positions_export_to_ctranslate2_with_the_same_outputs(learned):
    pytest.importorskip("ctranslate2")
    assert translate(learned, engine="ct2") == translate(learned)


def test_learned_positions_are_refused_by_export_hf_in_one_line(learned, tmp_path, capsys):
    pytest.importorskip("transformers")
    code, output = run_cli(["export-hf", "--model", learned, "--out", tmp_path / "hf"], capsys)
    assert_user_error(code, output, "model.positional='learned'")
    assert not (tmp_path / "hf").exists() or not any((tmp_path / "hf").iterdir())

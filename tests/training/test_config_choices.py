"""Every model and vocabulary choice docs/reference/config.md offers builds, trains (through a validation,
which translates the dev sentences), resumes, and translates from its saved directory without a traceback;
then each one exports (CTranslate2, Hugging Face: the same outputs, or one clear line where the format cannot
hold it), opens in the explorer (its translation with every attention map), and a Transformer's translates
with the compiled decoder as it does eagerly."""

import os
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


def translate(model_dir: Path, engine: str = "native", **options) -> list[str]:
    from aiayn.decoding.translator import Translator

    translator = Translator.from_pretrained(model_dir, engine=engine)
    return [r.text for r in translator.translate(SOURCES, beam=1, **options)]


@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: ",".join(s.split(".", 1)[1] for s in c))
def test_each_documented_model_choice_trains_resumes_and_translates(tmp_path, choice, capsys):
    train(tmp_path / "run", choice)
    texts = translate(train(tmp_path / "run", choice, steps=4))
    assert "resuming from" in capsys.readouterr().out
    assert len(texts) == len(SOURCES) and all(isinstance(t, str) for t in texts)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """choice -> its model directory, trained once for the module's tests."""
    runs = {}

    def get(choice) -> Path:
        key = ",".join(choice)
        if key not in runs:
            runs[key] = train(tmp_path_factory.mktemp("choice") / "run", choice)
        return runs[key]
    return get


def _is_rnn(choice) -> bool:
    return "model.arch=rnn" in choice


@pytest.mark.slow
@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: ",".join(s.split(".", 1)[1] for s in c))
def test_each_choice_exports_or_refuses_in_one_line(trained, choice, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    model_dir = trained(choice)
    code, output = run_cli(["export", "--model", model_dir, "--out", tmp_path / "ct2"], capsys)
    if _is_rnn(choice):  # CTranslate2 holds Transformers only
        assert_user_error(code, output, "Transformer")
    else:
        assert code == 0, output
        assert translate(model_dir, engine="ct2") == translate(model_dir)
    code, output = run_cli(["export-hf", "--model", model_dir, "--out", tmp_path / "hf"], capsys)
    assert code in (0, 2) and "Traceback" not in output, output
    if code == 2:  # what Marian cannot hold, named in its one line
        assert output.count("\n") == 1, output
    else:
        from transformers import MarianMTModel, MarianTokenizer

        hf = MarianMTModel.from_pretrained(tmp_path / "hf")
        tokenizer = MarianTokenizer.from_pretrained(tmp_path / "hf")
        ids = hf.generate(**tokenizer(SOURCES, return_tensors="pt", padding=True), num_beams=1, max_new_tokens=20)
        assert tokenizer.batch_decode(ids, skip_special_tokens=True) == translate(model_dir, max_output_len=20)


@pytest.mark.slow
@pytest.mark.parametrize("choice", CHOICES, ids=lambda c: ",".join(s.split(".", 1)[1] for s in c))
def test_each_choice_opens_in_the_explorer(trained, choice):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from aiayn.decoding.translator import Translator
    from aiayn.web.app import create_app

    translator = Translator.from_pretrained(trained(choice))
    client = TestClient(create_app(translator))
    body = client.post("/api/translate", json={"text": SOURCES[0], "beam": 2}).json()
    assert body["translation"] == translator.translate([SOURCES[0]], beam=2)[0].text
    kinds = {"cross"} if _is_rnn(choice) else {"encoder_self", "decoder_self", "cross"}
    assert kinds <= set(body["maps"]), body.keys()
    assert client.get("/api/info").status_code == 200


# the choices that change what the compiled step computes (the others change the data or the training only)
COMPILED = [c for c in CHOICES if not _is_rnn(c) and not any(
    s.startswith(("data.lowercase", "data.byte_fallback", "data.dataset", "model.attention_dropout")) for s in c)]


@pytest.mark.slow
@pytest.mark.parametrize("choice", COMPILED,
                         ids=lambda c: ",".join(s.split(".", 1)[1] for s in c))
def test_each_transformer_choice_translates_compiled_as_eagerly(trained, choice):
    from aiayn.decoding.compiled import compiler_present, torch_supports_compile
    from aiayn.decoding.translator import Translator

    if not (compiler_present() and torch_supports_compile()) and not os.environ.get("AIAYN_REQUIRE_COMPILER"):
        pytest.skip("the compiled decoder needs a C++ compiler and torch >= 2.13")
    model_dir = trained(choice)
    compiled = Translator.from_pretrained(model_dir, compile=True).translate(SOURCES, beam=2, max_output_len=12)
    eager = Translator.from_pretrained(model_dir).translate(SOURCES, beam=2, max_output_len=12)
    for c, e in zip(compiled, eager):  # an untrained model's hypotheses nearly tie: the last bits may choose
        assert c.text == e.text or abs(c.score - e.score) < 1e-4, (c.text, c.score, e.text, e.score)
        assert abs(c.score - e.score) < 1e-3


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

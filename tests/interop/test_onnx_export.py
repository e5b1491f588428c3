"""export-onnx: the two ONNX graphs, run by onnxruntime, give aiayn's logits and every attention map
within 1e-4, at batch sizes, lengths and padding other than the traced example's, for post-LN and pre-LN,
sinusoidal and learned positions; a greedy loop in numpy over them gives aiayn's greedy translations
(an untrained model here; a model trained briefly on the number task, on held-out sentences, in the slow
test; held out: numbers its training did not see). Bad inputs are one line."""

import json

import numpy as np
import pytest
import torch

from aiayn.checkpoint import load_checkpoint
from aiayn.config import load_config
from aiayn.data.synthetic import number_task
from aiayn.decoding.batches import encode_sources, pad_batch
from aiayn.decoding.translator import Translator
from aiayn.interop.onnx_export import export_onnx
from aiayn.run_dir import resolve_model_dir
from aiayn.training.run import prepare_run
from tests.cli_helpers import assert_user_error, run_cli
from tests.model_helpers import model_dir

pytest.importorskip("onnxruntime")
from aiayn.interop.onnx_greedy import OnnxGreedy  # noqa: E402  (needs onnxruntime)

TOL = 1e-4
TRAIN = ["data.synthetic_train=1500", "data.synthetic_valid=4", "data.vocab_size=64", "data.byte_fallback=false",
         "model.d_model=64", "model.n_heads=4", "model.d_ff=128", "model.dropout=0.0", "train.max_tokens=1024",
         "train.schedule=constant", "train.lr=3e-3", "train.warmup_steps=10", "train.max_steps=150",
         "train.eval_every=1000", "train.log_every=1000", "train.num_threads=2", "train.average_last=0",
         "train.save_every=1000"]


def _held_out(count: int) -> list[str]:
    """Number-task sentences that the trained model's run (TRAIN) does not train on."""
    data = load_config(None, TRAIN).data
    seen = {en for en, _ in number_task(data.synthetic_train, data.synthetic_valid, data.synthetic_valid,
                                        data.synthetic_seed)["train"]}
    return [en for en, _ in number_task(10, 10, 4 * count, seed=11)["test"] if en not in seen][:count]


HELD_OUT = _held_out(200)
VARIANTS = {"post-ln": {}, "pre-ln-learned-silu": dict(norm_first=True, positional="learned", activation="silu")}


@pytest.fixture(scope="module", params=list(VARIANTS))
def exported(request, tokenizer, tmp_path_factory):
    """(model directory, export directory) of an untrained tiny Transformer of each variant."""
    root = tmp_path_factory.mktemp(request.param)
    model = model_dir(root / "model", tokenizer, "tiny", **VARIANTS[request.param])
    return model, export_onnx(model, root / "onnx")


def _batch(tokenizer, sentences):
    return pad_batch(encode_sources(tokenizer, sentences), tokenizer.pad_id, "cpu")


def _assert_close(got: np.ndarray, expected: torch.Tensor, what: str):
    assert got.shape == tuple(expected.shape), what
    assert np.abs(got - expected.numpy()).max() < TOL, what


@torch.no_grad()
@pytest.mark.parametrize("sentences", [HELD_OUT[:1], HELD_OUT[1:4], HELD_OUT[4:11]])
def test_logits_and_every_map_equal_aiayn(exported, tokenizer, sentences):
    """Teacher forcing on target prefixes of several lengths; padded sources in the batches of 3 and 7."""
    model = load_checkpoint(exported[0])[0].eval()
    runtime = OnnxGreedy(directory=exported[1])
    src = _batch(tokenizer, sentences)
    memory, encoder_self = runtime.encode(src.numpy())
    for length in (1, 2, 9):
        seed = torch.Generator().manual_seed(length)
        tgt_in = torch.randint(4, tokenizer.vocab_size, (len(sentences), length), generator=seed)
        tgt_in[:, 0] = tokenizer.bos_id
        logits, maps = model(src, tgt_in, return_attention=True)
        got = runtime.decode(src.numpy(), memory, tgt_in.numpy())
        _assert_close(encoder_self, maps["encoder_self"], "encoder_self")
        for array, (name, expected) in zip(got, [("logits", logits), ("decoder_self", maps["decoder_self"]),
                                                 ("cross", maps["cross"])]):
            _assert_close(array, expected, f"{name} at T={length}")
    assert (src == tokenizer.pad_id).any() or len(sentences) == 1  # the batches hold padding


def _greedy_equal(model_path, onnx_path, sentences) -> int:
    """Asserts the numpy loop's outputs, and the maps along them, equal aiayn's greedy search; returns how
    many different outputs there were."""
    translator = Translator.from_pretrained(model_path)
    tokenizer = translator.tokenizer
    runtime = OnnxGreedy(directory=onnx_path)
    results = translator.translate(sentences, beam=1, return_attention=True)
    for sentence, source, result in zip(sentences, encode_sources(tokenizer, sentences), results):
        ids = runtime.translate_ids(source)
        assert tokenizer.id_to_piece(ids) == result.tokens, sentence
        assert tokenizer.decode(ids) == result.text
        src = np.asarray([source])
        memory, encoder_self = runtime.encode(src)
        # the maps along the output, as the explorer shows them: every step's row, </s> (if written) included
        steps = result.attention["cross"].shape[-2]
        tgt_in = np.asarray([[tokenizer.bos_id, *ids, tokenizer.eos_id][:steps]])
        _, decoder_self, cross = runtime.decode(src, memory, tgt_in)
        for name, got in (("encoder_self", encoder_self), ("decoder_self", decoder_self), ("cross", cross)):
            assert np.abs(got[0] - result.attention[name]).max() < TOL, (sentence, name)
    return len({r.text for r in results})


def test_greedy_loop_equals_aiayn_greedy(exported):
    _greedy_equal(exported[0], exported[1], HELD_OUT[:6])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A Transformer trained for 150 steps on the number task, and its export."""
    root = tmp_path_factory.mktemp("trained")
    prepare_run(load_config(None, TRAIN), root / "run").train()
    model = resolve_model_dir(root / "run")
    return model, export_onnx(model, root / "onnx")


@pytest.mark.slow
def test_greedy_equals_aiayn_on_200_held_out_sentences(trained):
    assert _greedy_equal(*trained, HELD_OUT) > 100  # the outputs depend on the source: the model has learnt


def test_facts_name_the_tokenizer_and_its_ids(exported, tokenizer):
    facts = json.loads((exported[1] / "model.json").read_text())
    assert (facts["pad_id"], facts["bos_id"], facts["eos_id"]) == (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    assert (exported[1] / "tokenizer.model").read_bytes() == tokenizer.proto
    for name in ("src", "memory", "tgt_in", "logits", "encoder_self", "decoder_self", "cross"):
        assert f"`{name}`" in (exported[1] / "README.md").read_text()


def test_bad_inputs_are_one_line(transformer_dir, rnn_dir, tmp_path, capsys):
    out = tmp_path / "onnx"
    code, output = run_cli(["export-onnx", "--model", rnn_dir, "--out", out], capsys)
    assert_user_error(code, output, "model.arch='rnn'", "Transformer")
    assert not out.exists()
    code, output = run_cli(["export-onnx", "--model", tmp_path / "missing", "--out", out], capsys)
    assert_user_error(code, output, tmp_path / "missing", "--model")
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, output = run_cli(["export-onnx", "--model", transformer_dir, "--out", out], capsys)
    assert_user_error(code, output, "--out", "not empty")
    assert (out / "notes.txt").read_text() == "mine"
    code, output = run_cli(["export-onnx", "--model", transformer_dir, "--out", tmp_path / "ok"], capsys)
    assert code == 0, output
    code, output = run_cli(["export-onnx", "--model", transformer_dir, "--out", tmp_path / "ok"], capsys)
    assert_user_error(code, output, "--force")
    code, output = run_cli(["export-onnx", "--model", transformer_dir, "--out", tmp_path / "ok", "--force"], capsys)
    assert code == 0, output

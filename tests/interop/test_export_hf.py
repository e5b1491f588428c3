"""export-hf: aiayn Transformers as Hugging Face Marian directories, proved offline on models trained here
briefly on the built-in number task, one with aiayn's joint vocabulary (decoder starts from <s>) and one
with separate vocabularies (starts from <pad>, as import-hf's models): MarianMTModel.generate() gives
aiayn's translations (greedy and beam with the hf length penalty), MarianTokenizer aiayn's ids, and
import-hf reads the directory back to the same weights. Configs Marian cannot express are refused."""

import warnings

import pytest
import torch

from aiayn.checkpoint import load_checkpoint, save_checkpoint
from aiayn.config import load_config
from aiayn.data.synthetic import number_task
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.interop.marian import import_marian
from aiayn.interop.marian_export import export_marian
from aiayn.model import ModelConfig, build_model
from aiayn.run_dir import resolve_model_dir
from aiayn.training.run import prepare_run

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # "Recommended: pip install sacremoses"

TRAIN = ["data.synthetic_train=1500", "data.synthetic_valid=4", "data.vocab_size=64", "data.byte_fallback=false",
         "model.d_model=64", "model.n_heads=4", "model.d_ff=128", "model.dropout=0.0", "train.max_tokens=1024",
         "train.schedule=constant", "train.lr=3e-3", "train.warmup_steps=10", "train.max_steps=150",
         "train.eval_every=1000", "train.log_every=1000", "train.num_threads=2", "train.average_last=0",
         "train.save_every=1000"]
SENTENCES = [en for en, _ in number_task(100, 10, 100, seed=7)["test"]]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """"joint" | "separate" -> the run directory of the model of a 150-step run (aiayn's joint SentencePiece vocabulary
    with activation relu; separate vocabularies, swish, untied source and target embeddings)."""
    root = tmp_path_factory.mktemp("runs")
    settings = {"joint": [], "separate": ["data.joint_vocab=false", "model.activation=silu"]}
    for name, extra in settings.items():
        prepare_run(load_config(None, [*TRAIN, *extra]), root / name).train()
    return {name: resolve_model_dir(root / name) for name in settings}


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {name: export_marian(run, root / name)[0] for name, run in trained.items()}


def _hf(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = transformers.MarianMTModel.from_pretrained(path).eval()
        return model, transformers.MarianTokenizer.from_pretrained(path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["joint", "separate"])
def test_token_ids_equal_marian_tokenizer(trained, exported, name):
    ours = load_checkpoint(trained[name])[2]
    _, tok = _hf(exported[name])
    for text in SENTENCES + ["ein und zwanzig", "zwei hundert", "sieben"]:
        assert ours.encode_source([text])[0] + [ours.eos_id] == tok(text).input_ids, text
        ids = ours.encode_target([text])[0]
        assert ours.decode(ids) == tok.decode(ids, skip_special_tokens=True), text


@pytest.mark.slow
@pytest.mark.parametrize("name", ["joint", "separate"])
def test_generate_equals_aiayn_on_100_sentences(trained, exported, name):
    """Greedy, and beam 4 with transformers' length penalty (|Y|^alpha) at two alphas and both stopping rules:
    the exported generation_config.json's defaults (bad_words_ids, no forced </s>, the start token) with
    only the search's knobs and one length limit given."""
    hf_model, tok = _hf(exported[name])
    translator = Translator.from_pretrained(trained[name])
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    searches = [dict(beam=1), dict(beam=4, alpha=1.0, early_stopping=False),
                dict(beam=4, alpha=0.6, early_stopping=True)]
    distinct = []  # how many different outputs each search gave
    for search in searches:
        out = hf_model.generate(**batch, num_beams=search["beam"], length_penalty=search.get("alpha", 1.0),
                                early_stopping=search.get("early_stopping", False), max_length=40)
        expected = tok.batch_decode(out, skip_special_tokens=True)
        # generate's max_length counts the start token: aiayn's limit is then the same number of outputs
        results = translator.translate(SENTENCES, length_penalty_form="hf", max_output_len=39, **search)
        same = sum(r.text == e for r, e in zip(results, expected))
        assert same == len(SENTENCES) == 100, (search, same)
        distinct.append(len({r.text for r in results}))
    assert min(distinct) > 50, distinct  # the outputs depend on the source (the model has learnt)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["joint", "separate"])
def test_import_hf_reads_the_export_back_to_the_same_weights(trained, exported, tmp_path, name):
    model, cfg, tok = load_checkpoint(trained[name])
    back, back_cfg, back_tok = load_checkpoint(import_marian(str(exported[name]), tmp_path / "back"))
    ours, theirs = model.state_dict(), back.state_dict()
    assert ours.keys() == theirs.keys()
    assert max((ours[k] - theirs[k]).abs().max().item() for k in ours) == 0.0
    assert back_tok.proto == tok.proto and back_tok.bos_id == tok.bos_id  # the joint one comes back as itself
    for field in ("d_model", "activation", "share_embeddings", "tie_output", "output_bias", "max_len", "pad_id"):
        assert getattr(back_cfg.model, field) == getattr(cfg.model, field), field
    assert back_cfg.decode.beam == cfg.decode.beam and back_cfg.decode.length_penalty == cfg.decode.length_penalty


@pytest.mark.parametrize("overrides", [dict(share_embeddings=True), dict(tie_output=False), dict(output_bias=True),
                                       dict(activation="gelu")])
@torch.no_grad()
def test_logits_equal_transformers_for_each_tying(tokenizer, tmp_path, overrides):
    model_dir = _model_dir(tmp_path / "model", tokenizer, **overrides)
    model = load_checkpoint(model_dir)[0]
    if overrides.get("output_bias"):
        model.generator.bias.normal_()
        save_checkpoint(model_dir, model, load_checkpoint(model_dir)[1], tokenizer)
    hf_model, _ = _hf(export_marian(model_dir, tmp_path / "hf")[0])
    src, tgt_in = torch.randint(4, tokenizer.vocab_size, (3, 7)), torch.randint(4, tokenizer.vocab_size, (3, 5))
    src[0, 5:] = tokenizer.pad_id
    tgt_in[:, 0] = tokenizer.bos_id
    expected = hf_model(input_ids=src, attention_mask=src != tokenizer.pad_id, decoder_input_ids=tgt_in).logits
    assert (model(src, tgt_in) - expected).abs().max() < 1e-4


def _model_dir(path, tokenizer, **overrides):
    cfg = load_config(None, [])
    fields = dict(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id,
                  d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0)
    cfg.model = ModelConfig.preset("tiny", **{**fields, **overrides})
    torch.manual_seed(0)
    return save_checkpoint(path, build_model(cfg.model), cfg, tokenizer)


REFUSED = [
    (dict(arch="rnn"), "model.arch='rnn'"),
    (dict(norm_first=True), "model.norm_first=true"),
    (dict(positional="learned"), "model.positional='learned'"),
    (dict(layer_norm_eps=1e-6), "model.layer_norm_eps=1e-06"),
    (dict(d_model=15, n_heads=3), "model.d_model=15"),
]


@pytest.mark.parametrize("overrides, field", REFUSED)
def test_configs_marian_cannot_express_are_refused_in_one_line(tokenizer, tmp_path, overrides, field):
    model_dir = _model_dir(tmp_path / "model", tokenizer, **overrides)
    with pytest.raises(AiaynError) as err:
        export_marian(model_dir, tmp_path / "hf")
    message = str(err.value)
    assert field in message and "cannot be exported to Marian" in message and "\n" not in message, message
    assert not (tmp_path / "hf").exists()


def test_output_directory_rules(transformer_dir, tmp_path):
    out = tmp_path / "hf"
    export_marian(transformer_dir, out)
    with pytest.raises(AiaynError, match="--force"):
        export_marian(transformer_dir, out)
    export_marian(transformer_dir, out, force=True)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(AiaynError, match="not empty"):
        export_marian(transformer_dir, foreign, force=True)
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"
    with pytest.raises(AiaynError, match="input"):
        export_marian(transformer_dir, transformer_dir / "inside")

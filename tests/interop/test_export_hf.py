"""export-hf: aiayn Transformers as Hugging Face Marian directories, proved offline on models trained here
briefly on the built-in number task, one with aiayn's joint vocabulary (decoder starts from <s>) and one
with separate vocabularies (starts from <pad>, as import-hf's models): MarianMTModel.generate() gives
aiayn's translations (greedy and beam with the hf length penalty), MarianTokenizer aiayn's ids,
CTranslate2's own converter makes a model that translates as aiayn does, generate() stops where aiayn
does on a model that never ends, the model card says what is recorded, and import-hf reads the directory
back to the same weights. Configs Marian cannot express are refused."""

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

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
    hf_src, hf_tgt_in = src.clone(), tgt_in.clone()  # transformers pads with, and starts from, the appended token
    hf_src[0, 5:] = hf_tgt_in[:, 0] = hf_model.config.decoder_start_token_id
    expected = hf_model(input_ids=hf_src, attention_mask=src != tokenizer.pad_id, decoder_input_ids=hf_tgt_in).logits
    ours = model(src, tgt_in)
    assert (ours - expected[..., :-1]).abs().max() < 1e-4
    # the appended token is never chosen: the other tokens' log-probabilities are aiayn's
    assert (ours.log_softmax(-1) - expected.log_softmax(-1)[..., :-1]).abs().max() < 1e-4


def _model_dir(path, tokenizer, settings=(), info=None, **overrides):
    cfg = load_config(None, list(settings))
    fields = dict(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id,
                  d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0)
    cfg.model = ModelConfig.preset("tiny", **{**fields, **overrides})
    torch.manual_seed(0)
    return save_checkpoint(path, build_model(cfg.model), cfg, tokenizer, info=info)


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


def _converter() -> str:
    found = shutil.which("ct2-transformers-converter") or Path(sys.executable).with_name("ct2-transformers-converter")
    if not Path(found).exists():
        pytest.skip("ct2-transformers-converter is not installed (pip install ctranslate2)")
    return str(found)


def _ct2_greedy(export_dir, ct2_dir, sentences, limits):
    """ctranslate2.Translator's greedy outputs for `sentences`, each at most limits[i] tokens: the source
    pieces of source.spm and </s>, as MarianTokenizer makes them."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(export_dir / "source.spm"))
    translator = ctranslate2.Translator(str(ct2_dir), device="cpu", intra_threads=2)
    out = []
    for sentence, limit in zip(sentences, limits):
        result = translator.translate_batch([sp.encode(sentence, out_type=str) + ["</s>"]], beam_size=1,
                                            max_decoding_length=limit)
        out.append(sp.decode(result[0].hypotheses[0]))
    return out


@pytest.mark.slow
def test_ctranslate2_converter_output_translates_as_aiayn(trained, exported, tmp_path):
    """The real ct2-transformers-converter reads the export of a joint vocabulary; ctranslate2.Translator's
    greedy outputs, with aiayn's length limit a * |source| + b, are aiayn's on every sentence."""
    subprocess.run([_converter(), "--model", str(exported["joint"]), "--output_dir", str(tmp_path / "ct2")],
                   check=True, capture_output=True)
    translator = Translator.from_pretrained(trained["joint"])
    ours = translator.translate(SENTENCES, beam=1)
    tok, decode = translator.tokenizer, load_checkpoint(trained["joint"])[1].decode
    limits = [int((len(ids) + 1) * decode.max_len_a + decode.max_len_b) for ids in tok.encode_source(SENTENCES)]
    theirs = _ct2_greedy(exported["joint"], tmp_path / "ct2", SENTENCES, limits)
    same = sum(r.text == t for r, t in zip(ours, theirs))
    assert same == len(SENTENCES) == 100, same
    assert len({r.text for r in ours}) > 50  # the outputs depend on the source (the model has learnt)


@pytest.mark.slow
@torch.no_grad()
def test_ctranslate2_converter_output_computes_aiayn_scores(tokenizer, tmp_path):
    """On an untrained model too (whose outputs run to the length limit): the converter's model scores a
    target as aiayn does (the start-row form: CTranslate2 starts the decoder from a zero vector and drops
    the last vocabulary entry), and its greedy outputs are aiayn's, limits included."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    model_dir = _model_dir(tmp_path / "model", tokenizer, settings=["decode.max_len_b=7"])
    export = export_marian(model_dir, tmp_path / "hf")[0]
    subprocess.run([_converter(), "--model", str(export), "--output_dir", str(tmp_path / "ct2")], check=True,
                   capture_output=True)
    translator = Translator.from_pretrained(model_dir)
    sentences = SENTENCES[:8]
    ours = translator.translate(sentences, beam=1)
    assert all(len(r.tokens) == len(tokenizer.encode_source([s])[0]) + 1 + 7 for r, s in zip(ours, sentences))
    limits = [len(ids) + 1 + 7 for ids in tokenizer.encode_source(sentences)]
    assert _ct2_greedy(export, tmp_path / "ct2", sentences, limits) == [r.text for r in ours]
    model = load_checkpoint(model_dir)[0].eval()
    pieces = [tokenizer.id_to_piece(ids) for ids in tokenizer.encode_source(sentences[:2])]
    ct2 = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    targets = [r.tokens for r in ours[:2]]
    scores = ct2.score_batch([p + ["</s>"] for p in pieces], targets)
    for i, ids in enumerate(tokenizer.encode_source(sentences[:2])):
        src = torch.tensor([ids + [tokenizer.eos_id]])
        tgt = [tokenizer.bos_id] + [tokenizer.piece_to_id(p) for p in targets[i]]
        log_probs = model(src, torch.tensor([tgt[:-1]])).log_softmax(-1)[0]
        expected = log_probs.gather(1, torch.tensor(tgt[1:])[:, None])[:, 0]
        assert torch.allclose(torch.tensor(scores[i].log_probs[:len(tgt) - 1]), expected, atol=1e-4)


@torch.no_grad()
def test_generate_stops_where_aiayn_stops_on_a_model_that_never_ends(tokenizer, tmp_path):
    """generate()'s max_length is aiayn's limit a * |source| + b at the longest source the model was trained
    on (data.max_len), plus the start token: an untrained model, whose outputs run to the limit, gives
    aiayn's output there, and no output longer than aiayn's limit for a source of that length."""
    lengths = [len(ids) for ids in tokenizer.encode_source(SENTENCES)]
    longest = SENTENCES[lengths.index(max(lengths))]
    model_dir = _model_dir(tmp_path / "model", tokenizer, settings=[f"data.max_len={max(lengths)}",
                                                                    "decode.max_len_a=1.5", "decode.max_len_b=9"])
    hf_model, tok = _hf(export_marian(model_dir, tmp_path / "hf")[0])
    limit = int((max(lengths) + 1) * 1.5 + 9)
    assert hf_model.generation_config.max_length == limit + 1
    batch = tok(SENTENCES[:20] + [longest], padding=True, return_tensors="pt")
    out = hf_model.generate(**batch, num_beams=1)  # the exported generation_config.json's limit
    produced = (out[:, 1:] != hf_model.config.pad_token_id).sum(1)
    assert produced.max().item() == limit  # it never ends: it runs to the limit, and no further
    theirs = tok.decode(out[-1], skip_special_tokens=True)
    ours = Translator.from_pretrained(model_dir).translate([longest], beam=1)[0]
    assert len(ours.tokens) == limit and ours.text == theirs


def _front_matter(card: str) -> dict:
    import yaml

    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_model_card_names_licence_data_config_and_what_is_recorded(tokenizer, tmp_path):
    import sacrebleu

    plain = export_marian(_model_dir(tmp_path / "plain", tokenizer), tmp_path / "hf", license="apache-2.0")[0]
    card = (plain / "README.md").read_text(encoding="utf-8")
    front = _front_matter(card)
    assert front["license"] == "apache-2.0" and front["library_name"] == "transformers"
    data = load_checkpoint(tmp_path / "plain")[1].data
    assert front["language"] == [data.src_lang, data.tgt_lang]
    assert "not evaluated" in card and "not recorded" in card  # no BLEU, not from a run directory
    assert "ct2-transformers-converter --model DIR" in card and "d_model: 16" in card  # the config, whole
    scored = _model_dir(tmp_path / "scored", tokenizer, info={"step": 40, "bleu": 12.345})
    card = (export_marian(scored, tmp_path / "hf2")[0] / "README.md").read_text(encoding="utf-8")
    metric = sacrebleu.BLEU()
    metric.corpus_score(["a b"], [["a b"]])
    signature = str(metric.get_signature())  # nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:...
    assert "dev BLEU 12.35 at step 40" in card and signature in card and "not evaluated" not in card
    assert _front_matter(card)["license"] == "other"


@pytest.mark.slow
def test_model_card_of_a_run_says_how_it_was_trained(trained, exported):
    card = (exported["joint"] / "README.md").read_text(encoding="utf-8")
    run = trained["joint"].parents[1]  # RUN/checkpoints/step_N
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert f"{steps[-1]['step']} steps in" in card and "aiayn train config.yaml" in card


@torch.no_grad()
def test_import_hf_reads_the_start_row_form_back_and_refuses_it_altered(transformer_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    export = export_marian(transformer_dir, tmp_path / "hf")[0]
    model, _, tok = load_checkpoint(transformer_dir)
    back, _, back_tok = load_checkpoint(import_marian(str(export), tmp_path / "back"))
    ours, theirs = model.state_dict(), back.state_dict()
    assert max((ours[k] - theirs[k]).abs().max().item() for k in ours) == 0.0 and back_tok.proto == tok.proto
    weights = load_file(export / "model.safetensors")
    weights["model.decoder.embed_positions.weight"][0] += 0.5  # no longer the start token's row
    save_file(weights, export / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(AiaynError) as err:
        import_marian(str(export), tmp_path / "back2")
    assert "aiayn_start_token_id" in str(err.value) and "\n" not in str(err.value)

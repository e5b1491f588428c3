"""Import of Hugging Face Marian (OPUS-MT) models, proved offline: small random MarianMTModels and
MarianTokenizers (SentencePiece models trained here on Multi30k lines) are saved with save_pretrained,
imported with `aiayn import-hf`, and compared with transformers: logits, cached decoding, token ids,
greedy outputs, the CLI, the web API and the CTranslate2 export. (A hub name such as
Helsinki-NLP/opus-mt-de-en goes through the same code after huggingface_hub downloads it: not testable
here, there is no network.)"""

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from aiayn.checkpoint import load_checkpoint
from aiayn.cli import main
from aiayn.decoding.batches import encode_sources
from aiayn.decoding.translator import Translator
from tests.data_helpers import find_multi30k, marian_spm, multi30k_lines, spm_pieces

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")


MULTI30K = find_multi30k()
pytestmark = [pytest.mark.skipif(MULTI30K is None, reason="no local Multi30k copy (set AIAYN_MULTI30K_DIR)"),
              pytest.mark.filterwarnings("ignore::UserWarning")]  # "Recommended: pip install sacremoses"
# Text SentencePiece never saw, language tags, and special tokens written out: ids must still agree.
ODD_TEXTS = ["日本語 😀 Ωμέγα ſ", ">>fr<< Ein Hund läuft.", ">>xx<< Ein Hund", " >>fr<< eins", ">>fr<<>>de<< zwei",
             "Ein </s> Mann<unk> und <pad>", "", "   ", "ein\ttab  und  leer ", "<pad", ">>fr<"]


def _lines(lang: str, split: str, n: int) -> list[str]:
    return multi30k_lines(MULTI30K, lang, split, n)


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
    """source.spm (German), target.spm (English), vocab.json (a joint table that leaves 20 pieces out, with
    two language tags, <pad> last) and target_vocab.json (a larger table in another order, <pad> at the same
    id: transformers' decoder needs pad_token_id inside its vocabulary)."""
    root = tmp_path_factory.mktemp("spm")
    src, tgt = marian_spm(_lines("de", "train", 400), 220), marian_spm(_lines("en", "train", 400), 200)
    (root / "source.spm").write_bytes(src)
    (root / "target.spm").write_bytes(tgt)
    joint = list(dict.fromkeys(spm_pieces(src) + spm_pieces(tgt)))[20:] + [">>fr<<", ">>de<<"]
    vocab = {p: i for i, p in enumerate(["</s>", "<unk>", *joint, "<pad>"])}
    (root / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    pad, pieces = len(vocab) - 1, list(dict.fromkeys(spm_pieces(tgt) + spm_pieces(src)))  # every piece, another order
    target = ["</s>", "<unk>", *pieces[: pad - 2], "<pad>", *pieces[pad - 2:], ">>fr<<"]
    assert len(target) > len(vocab)
    (root / "target_vocab.json").write_text(json.dumps({p: i for i, p in enumerate(target)}), encoding="utf-8")
    return root


def _tokenizer(spm_dir, separate_vocabs=False):
    extra = dict(separate_vocabs=True, target_vocab_file=str(spm_dir / "target_vocab.json")) if separate_vocabs \
        else {}
    return transformers.MarianTokenizer(str(spm_dir / "source.spm"), str(spm_dir / "target.spm"),
                                        str(spm_dir / "vocab.json"), **extra)


VARIANTS = {  # name -> MarianConfig settings
    "swish-shared": dict(activation_function="swish"),
    "relu-shared": dict(activation_function="relu"),
    "swish-separate-embeddings": dict(activation_function="swish", share_encoder_decoder_embeddings=False),
    "relu-untied-output": dict(activation_function="relu", share_encoder_decoder_embeddings=False,
                               tie_word_embeddings=False),
    "gelu-separate-vocabularies": dict(activation_function="gelu", share_encoder_decoder_embeddings=False,
                                       separate_vocabs=True),
}


def _hf_model(spm_dir, out: Path, activation_function="swish", separate_vocabs=False, **settings):
    """A random MarianMTModel (d_model 32, 2 + 2 layers) and its tokenizer, saved with save_pretrained."""
    tok = _tokenizer(spm_dir, separate_vocabs)
    target_size = len(tok.target_encoder) if separate_vocabs else len(tok.encoder)
    config = transformers.MarianConfig(
        vocab_size=len(tok.encoder), decoder_vocab_size=target_size, d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=96, pad_token_id=tok.pad_token_id,
        decoder_start_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, forced_eos_token_id=None,
        activation_function=activation_function, scale_embedding=True, dropout=0.0, init_std=0.25, **settings)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():  # non-zero (a random init makes it zero), so that an import without it would fail
        model.final_logits_bias.normal_(0.0, 1.0)
    _calibrate_eos(model, tok)
    model.generation_config.max_length = 24  # generate()'s limit: the start token and 23 more; the import keeps it
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@torch.no_grad()
def _calibrate_eos(model, tok) -> None:
    """Raise the bias of </s> so that the greedy outputs of 3 to 8 of the 12 test sentences end before the
    length limit (a random model otherwise ends never or at once). One greedy pass with </s> forbidden
    gives each sentence's smallest gap between its best logit and </s>'s; a bias above a sentence's gap
    ends it (at its first step with a smaller gap), below it changes nothing."""
    batch = tok(_lines("de", "val", 12), padding=True, return_tensors="pt")
    out = model.generate(**batch, num_beams=1, do_sample=False, max_length=24, forced_eos_token_id=None,
                         bad_words_ids=[[tok.pad_token_id], [tok.eos_token_id]], output_logits=True,
                         return_dict_in_generate=True)
    logits = torch.stack(out.logits, dim=1)  # (B, T, V), before the ban
    eos = logits[..., tok.eos_token_id].clone()
    logits[..., [tok.pad_token_id, tok.eos_token_id]] = float("-inf")
    gaps = (logits.max(dim=-1).values - eos).min(dim=1).values.sort().values  # (B,)
    k = max(range(3, 9), key=lambda k: gaps[k] - gaps[k - 1])  # k sentences end: the widest split of 3..8
    model.final_logits_bias[0, tok.eos_token_id] += (gaps[k - 1] + gaps[k]) / 2  # far from both sides


@pytest.fixture(scope="module")
def hf_dirs(spm_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: _hf_model(spm_dir, root / name, **settings) for name, settings in VARIANTS.items()}


@pytest.fixture(scope="module")
def imported(hf_dirs, tmp_path_factory):
    """name -> aiayn checkpoint directory made by `aiayn import-hf`."""
    root = tmp_path_factory.mktemp("imported")
    for name, path in hf_dirs.items():
        assert main(["import-hf", str(path), "--out", str(root / name)]) == 0
    return {name: root / name for name in hf_dirs}


def _hf(hf_dirs, name):
    return (transformers.MarianMTModel.from_pretrained(hf_dirs[name]).eval(),
            transformers.MarianTokenizer.from_pretrained(hf_dirs[name]))


def _padded_batch(tok, n=4):
    src, tgt = _lines("de", "val", n), _lines("en", "val", n)
    batch = tok(src, text_target=tgt, padding=True, return_tensors="pt")
    labels = batch["labels"]
    assert (batch.input_ids == tok.pad_token_id).any() and (labels == tok.pad_token_id).any()  # padded
    decoder_input = torch.cat([torch.full_like(labels[:, :1], tok.pad_token_id), labels[:, :-1]], dim=1)
    return batch, decoder_input


@pytest.mark.parametrize("name", list(VARIANTS))
@torch.no_grad()
def test_logits_and_cached_decoding_equal_transformers(hf_dirs, imported, name):
    hf_model, tok = _hf(hf_dirs, name)
    model, cfg, _ = load_checkpoint(imported[name])
    batch, decoder_input = _padded_batch(tok)
    expected = hf_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                        decoder_input_ids=decoder_input).logits
    logits = model(batch.input_ids, decoder_input)
    assert (logits - expected).abs().max() < 1e-4
    # decode_step through the KV cache, one position at a time, from the decoder start token (<pad>)
    state = model.init_state(model.encode(batch.input_ids)[0], batch.input_ids)
    expected_lp = expected.log_softmax(-1)
    for t in range(decoder_input.size(1)):
        log_probs, state, _ = model.decode_step(decoder_input[:, t], state)
        assert (log_probs - expected_lp[:, t]).abs().max() < 1e-4
    assert cfg.model.output_bias and cfg.model.activation == {"swish": "silu"}.get(
        hf_model.config.activation_function, hf_model.config.activation_function)
    assert cfg.model.share_embeddings == hf_model.config.share_encoder_decoder_embeddings


@pytest.mark.parametrize("name", ["swish-shared", "gelu-separate-vocabularies"])
def test_token_ids_equal_marian_tokenizer(hf_dirs, imported, name):
    _, tok = _hf(hf_dirs, name)
    ours = load_checkpoint(imported[name])[2]
    german, english = _lines("de", "test_2016_flickr", 100), _lines("en", "test_2016_flickr", 100)
    for text in german + ODD_TEXTS:
        assert ours.encode_source([text])[0] + [ours.eos_id] == tok(text).input_ids, text
    for text in english + ODD_TEXTS:
        ids = tok(text_target=text).input_ids
        assert ours.encode_target([text])[0] + [ours.eos_id] == ids, text
        assert ours.decode(ids) == tok.decode(ids, skip_special_tokens=True), text
    unk = ours.encode_source(["日本語 😀"])[0]
    assert ours.unk_id in unk and ours.encode_source([">>fr<< x"])[0][0] == tok.convert_tokens_to_ids(">>fr<<")
    assert ours.bos_id == ours.pad_id == tok.pad_token_id  # Marian's decoder starts from <pad>


def _generate(hf_model, tok, sentences, max_length):
    """HF greedy outputs without the start token, up to the first </s>. forced_eos_token_id=None: aiayn ends
    a hypothesis at its length limit as it is, without forcing </s> into the last position."""
    batch = tok(sentences, padding=True, return_tensors="pt")
    out = hf_model.generate(**batch, num_beams=1, do_sample=False, max_length=max_length,
                            bad_words_ids=[[tok.pad_token_id]], forced_eos_token_id=None)
    rows = []
    for row in out[:, 1:].tolist():
        rows.append(row[: row.index(tok.eos_token_id)] if tok.eos_token_id in row else row)
    return rows


@pytest.mark.parametrize("name", ["swish-shared", "relu-untied-output", "gelu-separate-vocabularies"])
def test_greedy_decoding_equals_generate(hf_dirs, imported, name):
    hf_model, tok = _hf(hf_dirs, name)
    translator = Translator.from_pretrained(imported[name])
    sentences = _lines("de", "val", 12)
    max_length = 24  # HF counts the start token
    expected = _generate(hf_model, tok, sentences, max_length)
    results = translator.translate(sentences, beam=1, max_output_len=max_length - 1)
    assert 0 < sum(len(e) < max_length - 1 for e in expected) < 12  # some end with </s> (_calibrate_eos), ...
    assert len({tuple(e) for e in expected}) > 3  # ... and the outputs depend on the source
    for result, ids in zip(results, expected):
        assert result.tokens == tok.convert_ids_to_tokens(ids)
        assert result.text == tok.decode(ids, skip_special_tokens=True)


def _strip(row: list[int], tok) -> list[int]:
    """An output of generate() without its start token, up to the first </s> or padding."""
    row = row[1:]
    ends = [i for i, x in enumerate(row) if x in (tok.eos_token_id, tok.pad_token_id)]
    return row[: ends[0]] if ends else row


@pytest.mark.parametrize("name", ["swish-shared", "gelu-separate-vocabularies"])
def test_beam_search_with_the_hf_length_penalty_equals_generate(hf_dirs, imported, name):
    """transformers divides a hypothesis' log-probability by |Y|^alpha, GNMT (aiayn's default) by
    ((5 + |Y|) / 6)^alpha; an imported model's decode.length_penalty_form is "hf", and with it beam search
    gives generate()'s outputs."""
    hf_model, tok = _hf(hf_dirs, name)
    translator = Translator.from_pretrained(imported[name])
    assert translator.decode_cfg.length_penalty_form == "hf"
    sentences = _lines("de", "val", 12)
    batch = tok(sentences, padding=True, return_tensors="pt")
    for alpha in (1.0, 0.6, 2.0):
        out = hf_model.generate(**batch, num_beams=4, do_sample=False, max_length=24, length_penalty=alpha,
                                early_stopping=False, bad_words_ids=[[tok.pad_token_id]], forced_eos_token_id=None)
        results = translator.translate(sentences, beam=4, alpha=alpha, max_output_len=23)
        for result, row in zip(results, out.tolist()):
            assert result.tokens == tok.convert_ids_to_tokens(_strip(row, tok)), alpha


def test_translate_and_attention_cli(imported, tmp_path, capsys):
    model = str(imported["swish-shared"])
    source = tmp_path / "in.de"
    source.write_text("Ein Mann fährt Fahrrad.\n>>fr<< Zwei Hunde 😀\n", encoding="utf-8")
    assert main(["translate", "--model", model, "--input", str(source), "--beam", "2", "--length-penalty-form",
                 "gnmt"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    out = tmp_path / "maps.json"
    assert main(["attention", "--model", model, "Ein Mann fährt Fahrrad.", "--out", str(out), "--kind", "all"]) == 0
    maps = json.loads(out.read_text(encoding="utf-8"))
    assert maps["target_input_tokens"][0] == "<pad>" and maps["source_tokens"][-1] == "</s>"
    assert main(["attention", "--model", model, "Ein Mann.", "--target", "A man.", "--out", str(out)]) == 0


def test_web_api_on_imported_model(imported):
    testclient = pytest.importorskip("fastapi.testclient")
    from aiayn.web.app import create_app

    client = testclient.TestClient(create_app(Translator.from_pretrained(imported["gelu-separate-vocabularies"])))
    body = client.post("/api/translate", json={"text": "Ein Mann fährt Fahrrad.", "beam": 2}).json()
    assert body["target_input_tokens"][0] == "<pad>"
    ids = {"source_ids": body["source_ids"], "target_input_ids": body["target_input_ids"]}
    step = client.post("/api/step", json={**ids, "kind": "cross", "layer": 1, "head": 0, "query": 0}).json()
    cross = torch.tensor(body["maps"]["cross"])
    assert (torch.tensor(step["weights"]) - cross[1, 0, 0]).abs().max() < 1e-3
    info = client.get("/api/info").json()  # the model panel names the import, not a default data section
    assert info["dataset"].startswith("(imported from ") and "synthetic" not in json.dumps(info)


def _edited_copy(src: Path, dst: Path, **changes) -> Path:
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text(encoding="utf-8"))
    (dst / "config.json").write_text(json.dumps({**config, **changes}), encoding="utf-8")
    return dst


@pytest.mark.parametrize("changes, field", [
    (dict(normalize_before=True), "normalize_before"),
    (dict(scale_embedding=False), "scale_embedding"),
    (dict(static_position_embeddings=False), "static_position_embeddings"),
    (dict(normalize_embedding=True), "normalize_embedding"),
    (dict(activation_function="gelu_new"), "activation_function"),
    (dict(decoder_attention_heads=2), "decoder_attention_heads"),
    (dict(encoder_attention_heads=3, decoder_attention_heads=3), "d_model"),
    (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    (dict(model_type="bart"), "model_type"),
    (dict(pad_token_id=3, decoder_start_token_id=3), "pad_token_id"),
])
def test_unrepresentable_configs_are_refused(hf_dirs, tmp_path, capsys, changes, field):
    src = _edited_copy(hf_dirs["swish-shared"], tmp_path / "model", **changes)
    assert main(["import-hf", str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and field in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_learned_positions_are_refused(hf_dirs, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    src = shutil.copytree(hf_dirs["swish-shared"], tmp_path / "model")
    weights = load_file(src / "model.safetensors")
    weights["model.encoder.embed_positions.weight"] = torch.randn(96, 32)  # a learned table in the file
    save_file(weights, src / "model.safetensors", metadata={"format": "pt"})
    assert main(["import-hf", str(src), "--out", str(tmp_path / "out")]) == 2
    assert "embed_positions" in capsys.readouterr().err


def test_output_directory_rules(hf_dirs, imported, tmp_path, capsys):
    src = str(hf_dirs["relu-shared"])
    assert main(["import-hf", src, "--out", str(imported["relu-shared"])]) == 2  # an earlier import
    assert "--force" in capsys.readouterr().err
    copy = shutil.copytree(imported["relu-shared"], tmp_path / "copy")
    assert main(["import-hf", src, "--out", str(copy), "--force"]) == 0
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    assert main(["import-hf", src, "--out", str(foreign), "--force"]) == 2
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert main(["import-hf", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "o")]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_ctranslate2_export_of_imported_model_decodes_like_aiayn(imported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    model_dir = imported["swish-shared"]  # silu FFN and an output bias
    assert main(["export", "--model", str(model_dir), "--out", str(tmp_path / "ct2")]) == 0
    translator = Translator.from_pretrained(model_dir)
    tok = translator.tokenizer
    sentences, limit = _lines("de", "val", 12), 23
    sources = encode_sources(tok, sentences)
    ct = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    # aiayn never outputs <pad> (Marian's decoder start) and may output </s> first: CTranslate2 is told the same
    results = ct.translate_batch([tok.source_id_to_piece(s) for s in sources], beam_size=1,
                                 max_decoding_length=limit, min_decoding_length=0, suppress_sequences=[["<pad>"]])
    native = translator.translate(sentences, beam=1, max_output_len=limit)
    assert any(len(ours.tokens) < limit - 1 for ours in native) and any(len(o.tokens) >= limit - 1 for o in native)
    for result, ours in zip(results, native):
        if len(ours.tokens) < limit - 1:  # ended with </s>: the same output
            assert result.hypotheses[0] == ours.tokens
        else:  # at the length limit, which CTranslate2 counts slightly differently
            assert result.hypotheses[0][: limit - 1] == ours.tokens[: limit - 1]


def test_checkpoints_from_before_the_new_fields_load_unchanged(transformer_dir, tmp_path):
    """A checkpoint written before model.output_bias existed: neither config.yaml nor the weights' metadata
    name it; it loads as a model without an output bias, with the same logits."""
    import yaml
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    old = shutil.copytree(transformer_dir, tmp_path / "old")
    config = yaml.safe_load((old / "config.yaml").read_text(encoding="utf-8"))
    del config["model"]["output_bias"]
    (old / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    tensors = load_file(old / "model.safetensors")
    with safe_open(str(old / "model.safetensors"), "pt") as f:
        metadata = f.metadata()
    saved = json.loads(metadata["aiayn_model_config"])
    del saved["output_bias"]
    save_file(tensors, old / "model.safetensors", metadata={"aiayn_model_config": json.dumps(saved)})
    model, cfg, _ = load_checkpoint(old)
    reference, _, _ = load_checkpoint(transformer_dir)
    assert not cfg.model.output_bias and model.generator.bias is None
    src, tgt = torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8, 9]])
    assert torch.equal(model(src, tgt), reference(src, tgt))


def test_damaged_hf_files_are_named(hf_dirs, tmp_path, capsys):
    """Damaged weights, a config field of the wrong type, an empty source.spm: one line naming the file,
    exit 2 (they were tracebacks, and the empty .spm was imported and failed at the first sentence)."""
    from tests.cli_helpers import assert_user_error, run_cli

    src = hf_dirs["swish-shared"]
    cases = {"model.safetensors": (b'{"garbage', "could not load the model weights"),
             "config.json": (None, "config.json"), "source.spm": (b"", "source.spm: empty file")}
    for name, (data, needle) in cases.items():
        bad = tmp_path / name.replace(".", "_")
        shutil.copytree(src, bad)
        if data is None:
            config = json.loads((bad / name).read_text())
            config["d_model"] = "big"
            (bad / name).write_text(json.dumps(config))
        else:
            (bad / name).write_bytes(data)
        assert_user_error(*run_cli(["import-hf", bad, "--out", tmp_path / f"out_{bad.name}"], capsys), needle)
        assert not (tmp_path / f"out_{bad.name}").exists()


def _edit_weights(src: Path, out: Path, edit) -> Path:
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, out)
    tensors = load_file(out / "model.safetensors")
    edit(tensors)
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    return out


BAD_WEIGHTS = {  # name -> (edit of the saved tensors, what the one line says)
    "missing": (lambda t: t.pop("model.encoder.layers.0.fc1.weight"),
                "model.encoder.layers.0.fc1.weight: missing from the files"),
    "mismatched": (lambda t: t.update({"model.encoder.layers.0.fc1.weight": torch.zeros(3, 3)}),
                   "model.encoder.layers.0.fc1.weight: (3, 3) in the files, (64, 32) in config.json's model"),
    "unexpected": (lambda t: t.update({"model.encoder.layers.7.fc1.weight": torch.zeros(3, 3)}),
                   "model.encoder.layers.7.fc1.weight: in the files but not in config.json's model"),
    "nan": (lambda t: t["model.encoder.layers.0.fc1.weight"].__setitem__((0, 0), float("nan")),
            "model.safetensors: tensor model.encoder.layers.0.fc1.weight holds 1 NaN or infinite value(s)"),
}


@pytest.mark.parametrize("case", list(BAD_WEIGHTS))
def test_weights_that_do_not_fit_are_one_line_without_transformers_report(hf_dirs, tmp_path, capfd, case):
    """Missing, reshaped or extra tensors (transformers initialized them at random and imported, or printed
    its load report before failing) and NaN weights: aiayn's one line alone, exit 2, nothing written."""
    edit, needle = BAD_WEIGHTS[case]
    import transformers

    bad = _edit_weights(hf_dirs["swish-shared"], tmp_path / "bad", edit)
    verbosity = transformers.utils.logging.get_verbosity()
    capfd.readouterr()
    code = main(["import-hf", str(bad), "--out", str(tmp_path / "out")])
    out, err = capfd.readouterr()
    assert code == 2 and out == "" and needle in err, err
    assert err.count("\n") == 1 and err.startswith("aiayn import-hf: error: "), err
    assert not (tmp_path / "out").exists()
    assert transformers.utils.logging.get_verbosity() == verbosity  # restored


def test_a_good_import_prints_one_line(hf_dirs, tmp_path, capfd):
    capfd.readouterr()
    assert main(["import-hf", str(hf_dirs["relu-shared"]), "--out", str(tmp_path / "out")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and out.startswith(f"wrote {tmp_path / 'out'}: an aiayn checkpoint")


def _served_languages(model: Path) -> tuple:
    """GET /languages and POST /translate (de -> en) of `aiayn serve` on an imported model, with the
    Translator's own output for the same text."""
    testclient = pytest.importorskip("fastapi.testclient")
    from aiayn.web.app import create_app

    translator = Translator.from_pretrained(model)
    client = testclient.TestClient(create_app(translator))
    answer = client.post("/translate", json={"q": "Ein Mann fährt Fahrrad.", "source": "de", "target": "en"})
    return client.get("/languages").json(), answer, translator.translate(["Ein Mann fährt Fahrrad."])[0].text


DE_EN = [{"code": "de", "name": "German", "targets": ["en"]}, {"code": "en", "name": "English", "targets": []}]


def _tokenizer_config_copy(src: Path, dst: Path, **changes) -> Path:
    shutil.copytree(src, dst)
    config = json.loads((dst / "tokenizer_config.json").read_text(encoding="utf-8"))
    (dst / "tokenizer_config.json").write_text(json.dumps({**config, **changes}), encoding="utf-8")
    return dst


@pytest.mark.parametrize("how", ["tokenizer_config", "options", "opus-mt name"])
def test_the_language_pair_is_served_as_libretranslate(hf_dirs, tmp_path, capsys, how):
    """The pair the folder names (its tokenizer's source_lang/target_lang, or an OPUS-MT folder name) or the
    options give is recorded, and the served LibreTranslate API lists it and translates as the model does."""
    src, options = hf_dirs["relu-shared"], []
    if how == "tokenizer_config":
        src = _tokenizer_config_copy(src, tmp_path / "model", source_lang="de", target_lang="en")
    elif how == "options":
        options = ["--src-lang", "de", "--tgt-lang", "en"]
    else:
        src = shutil.copytree(src, tmp_path / "opus-mt-de-en")
    assert main(["import-hf", str(src), "--out", str(tmp_path / "out"), *options]) == 0
    assert "de->en" in capsys.readouterr().out
    languages, answer, own = _served_languages(tmp_path / "out")
    assert languages == DE_EN
    assert answer.status_code == 200 and answer.json() == {"translatedText": own}


def test_an_import_that_names_no_languages_says_how_to_name_them(hf_dirs, tmp_path, capsys):
    """Neither the folder nor the options name the pair (as in every import made before import-hf recorded
    it: config.yaml's data languages are then aiayn's defaults, en and de, and are not the model's)."""
    from aiayn.web.libretranslate import UNNAMED

    assert main(["import-hf", str(hf_dirs["relu-shared"]), "--out", str(tmp_path / "out")]) == 0
    assert "--src-lang and --tgt-lang" in capsys.readouterr().out
    languages, answer, _ = _served_languages(tmp_path / "out")
    assert languages == [] and answer.status_code == 400 and answer.json() == {"error": UNNAMED}
    assert "--src-lang de --tgt-lang en" in UNNAMED and "\n" not in UNNAMED


@pytest.mark.parametrize("options, words", [(["--src-lang", "de"], "give both"),
                                            (["--src-lang", "de", "--tgt-lang", "en glish"], "not a language code")])
def test_language_options_are_checked_before_anything_is_written(hf_dirs, tmp_path, capsys, options, words):
    assert main(["import-hf", str(hf_dirs["relu-shared"]), "--out", str(tmp_path / "out"), *options]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()

"""Scoring given translations (Translator.score, aiayn score, /api/score): the score is the teacher-forced
sum of the target's token log-probs, length-normalized as beam search normalizes; a beam hypothesis's score
equals the score of its text; a pair's score does not depend on its batch neighbours; the CTranslate2 engine
agrees with the native one; an imported Marian model's score is transformers' loss on the same pair."""

import json
import shutil

import pytest
import torch
from fastapi.testclient import TestClient

from aiayn.checkpoint import save_checkpoint
from aiayn.cli import main
from aiayn.config import load_config
from aiayn.data.synthetic import number_task
from aiayn.decoding.beam import length_penalty
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.model import ModelConfig, build_model
from aiayn.web.app import Limits, create_app
from tests.cli_helpers import assert_user_error, run_cli
from tests.data_helpers import find_multi30k, marian_spm, multi30k_lines, spm_pieces

SOURCES = [p[0] for p in number_task(40, 10, 10, seed=3)["train"]][:12]
EOS_BIAS = 2.0  # raised </s> logit: most beam hypotheses of the untrained model end before their limit


@pytest.fixture(scope="module")
def ending_dir(tmp_path_factory, tokenizer):
    """An untrained tiny Transformer whose output bias favours </s>, so that beam hypotheses end with it."""
    cfg = load_config(None, [])
    cfg.model = ModelConfig.preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                   pad_id=tokenizer.pad_id, dropout=0.0, output_bias=True, max_len=64)
    torch.manual_seed(0)
    model = build_model(cfg.model)
    with torch.no_grad():
        model.generator.bias[tokenizer.eos_id] = EOS_BIAS
    root = tmp_path_factory.mktemp("ending") / "model"
    save_checkpoint(root, model, cfg, tokenizer)
    return root


@pytest.fixture(scope="module")
def translator(ending_dir):
    return Translator.from_pretrained(ending_dir)


@torch.no_grad()
def _stepwise_log_probs(model, tok, source: str, target: str) -> list[float]:
    """The target's token log-probs (</s> included) by cached decoding, one decode_step at a time."""
    src = torch.tensor([tok.encode_source([source])[0] + [tok.eos_id]])
    state = model.init_state(model.encode(src)[0], src)
    token, out = tok.bos_id, []
    for y in tok.encode_target([target])[0] + [tok.eos_id]:
        log_probs, state, _ = model.decode_step(torch.tensor([token]), state)
        out.append(float(log_probs[0, y]))
        token = y
    return out


def test_score_is_the_teacher_forced_sum_normalized_as_beam_search(translator):
    targets = ["neun", "vierzig fünf", "", "drei hundert tausend zwei"]
    for form, alpha in (("gnmt", 0.6), ("hf", 1.0), ("gnmt", 0.0)):
        scores = translator.score(SOURCES[:4], targets, alpha=alpha, length_penalty_form=form)
        for source, target, s in zip(SOURCES, targets, scores):
            stepwise = _stepwise_log_probs(translator.model, translator.tokenizer, source, target)
            assert s.token_log_probs == pytest.approx(stepwise, abs=1e-5)
            assert s.log_prob == pytest.approx(sum(s.token_log_probs), abs=1e-9)
            assert s.tokens[-1] == "</s>" and len(s.tokens) == len(s.token_log_probs)
            assert s.score == pytest.approx(s.log_prob / length_penalty(len(s.tokens), alpha, form), abs=1e-9)


def test_an_empty_target_is_scored_as_eos_alone(translator):
    s = translator.score(["neun"], [""])[0]
    assert s.tokens == ["</s>"] and s.log_prob == s.token_log_probs[0] < 0
    assert s.log_prob == pytest.approx(_stepwise_log_probs(translator.model, translator.tokenizer, "neun", "")[0],
                                       abs=1e-5)


@pytest.mark.parametrize("form", ["gnmt", "hf"])
def test_a_beam_hypothesis_scores_what_beam_search_scored_it(translator, form):
    results = translator.translate(SOURCES, beam=4, length_penalty_form=form, max_output_len=24)
    scores = translator.score(SOURCES, [r.text for r in results], length_penalty_form=form)
    # hypotheses that ended with </s> (not at their limit) and whose text encodes to their own pieces
    checked = [(r, s) for r, s in zip(results, scores) if not r.stopped_at_limit and s.tokens[:-1] == r.tokens]
    assert len(checked) >= 6
    for r, s in checked:
        assert s.score == pytest.approx(r.score, abs=1e-5)


def test_a_pairs_score_does_not_depend_on_its_batch_neighbours(translator):
    targets = ["neun", "vierzig", "", "drei hundert tausend zwei", "sieben", "fünf und fünfzig"] * 2
    together = translator.score(SOURCES, targets, batch_size=64)
    for options in (dict(batch_size=1), dict(batch_size=5), dict(max_tokens=40)):
        for a, b in zip(together, translator.score(SOURCES, targets, **options), strict=True):
            assert b.tokens == a.tokens
            assert b.token_log_probs == pytest.approx(a.token_log_probs, abs=1e-5)


def test_bad_pairs_are_one_clear_line(translator):
    with pytest.raises(AiaynError, match="2 sources but 1 targets"):
        translator.score(["neun", "zehn"], ["nine"])
    with pytest.raises(AiaynError, match="target 2: .* this model takes at most 64"):
        translator.score(["neun", "zehn"], ["neun", "neun " * 80])
    with pytest.raises(AiaynError, match="give a list of strings"):
        translator.score("neun", "nine")


@pytest.fixture
def pair_files(tmp_path):
    targets = ["neun", "", "drei hundert"]
    (tmp_path / "src.txt").write_text("\n".join(SOURCES[:3]) + "\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n", encoding="utf-8")
    return tmp_path / "src.txt", tmp_path / "tgt.txt", targets


def test_cli_prints_one_json_object_per_line_and_tsv(ending_dir, pair_files, translator, capsys):
    src, tgt, targets = pair_files
    code, out = run_cli(["score", "--model", ending_dir, "--src", src, "--tgt", tgt, "--max-tokens", "30"], capsys)
    assert code == 0, out
    lines = [json.loads(line) for line in out.splitlines()]
    expected = translator.score(SOURCES[:3], targets)
    assert [d["tokens"] for d in lines] == [s.tokens for s in expected]
    assert [d["score"] for d in lines] == pytest.approx([s.score for s in expected], abs=1e-6)
    assert set(lines[0]) == {"score", "log_prob", "tokens", "token_log_probs"}
    code, out = run_cli(["score", "--model", ending_dir, "--src", src, "--tgt", tgt, "--format", "tsv"], capsys)
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and len(rows) == 3 and all(len(r) == 4 for r in rows)
    assert float(rows[1][0]) == pytest.approx(expected[1].score, abs=1e-5) and rows[1][2] == "</s>"


def test_cli_bad_inputs_are_one_line(ending_dir, pair_files, tmp_path, capsys):
    src, tgt, _ = pair_files
    (tmp_path / "short.txt").write_text("neun\n", encoding="utf-8")
    assert_user_error(*run_cli(["score", "--model", ending_dir, "--src", src, "--tgt", tmp_path / "short.txt"],
                               capsys), "has 3 lines", "has 1")
    (tmp_path / "long.txt").write_text("neun\nneun\n" + "neun " * 80 + "\n", encoding="utf-8")
    assert_user_error(*run_cli(["score", "--model", ending_dir, "--src", src, "--tgt", tmp_path / "long.txt"],
                               capsys), "target 3", "at most 64")


def test_api_score_equals_translator_score_within_the_servers_bounds(ending_dir, translator):
    client = TestClient(create_app(translator))
    body = client.post("/api/score", json={"sources": SOURCES[:2], "targets": ["neun", ""]}).json()
    expected = translator.score(SOURCES[:2], ["neun", ""])
    assert [s["score"] for s in body["scores"]] == pytest.approx([s.score for s in expected], abs=1e-6)
    assert body["scores"][1]["tokens"] == ["</s>"]
    r = client.post("/api/score", json={"sources": ["neun"], "targets": ["neun", "zehn"]})
    assert r.status_code == 400 and "1 sources but 2 targets" in r.json()["error"]
    r = client.post("/api/score", json={"sources": ["neun"], "targets": ["neun " * 80]})
    assert r.status_code == 400 and "target 1: 81 subword tokens" in r.json()["error"]  # the model's bound
    small = TestClient(create_app(translator, Limits(max_output_tokens=8)))
    r = small.post("/api/score", json={"sources": ["neun"], "targets": ["neun " * 10]})
    assert r.status_code == 400 and "targets[0]: 11 subword tokens" in r.json()["error"]  # the server's bound
    assert client.post("/api/score", json={"sources": ["neun"] * 65, "targets": ["a"] * 65}).status_code == 422


def test_ct2_scores_equal_native_scores(ending_dir, tmp_path):
    pytest.importorskip("ctranslate2")
    model_dir = shutil.copytree(ending_dir, tmp_path / "model")  # the engine writes its cache there
    native = Translator.from_pretrained(model_dir)
    ct2 = Translator.from_pretrained(model_dir, engine="ct2", compute_type="float32")
    targets = ["neun", "", "drei hundert tausend zwei", "vierzig fünf"] * 3
    a = native.score(SOURCES, targets, length_penalty_form="hf")
    b = ct2.score(SOURCES, targets, batch_size=5)
    for x, y in zip(a, b, strict=True):
        assert y.tokens == x.tokens
        # no renormalization in scoring: CTranslate2's log-probs are the plain softmax's, as aiayn's
        assert y.token_log_probs == pytest.approx(x.token_log_probs, abs=1e-4)
        assert y.score == pytest.approx(x.score, abs=1e-4)
    assert [s.score for s in ct2.score(SOURCES, targets, max_tokens=30)] == pytest.approx([s.score for s in b],
                                                                                         abs=1e-5)


# ---- imported Marian models: the score is transformers' loss -----------------------------------------------------
MULTI30K = find_multi30k()


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """A random MarianMTModel (d_model 32, 2 + 2 layers) with SentencePiece models trained on Multi30k lines,
    saved with save_pretrained and imported with `aiayn import-hf`: (transformers model, its tokenizer, aiayn dir)."""
    transformers = pytest.importorskip("transformers")
    if MULTI30K is None:
        pytest.skip("no local Multi30k copy (set AIAYN_MULTI30K_DIR)")
    root = tmp_path_factory.mktemp("marian")
    src = marian_spm(multi30k_lines(MULTI30K, "de", "train", 400), 200)
    tgt = marian_spm(multi30k_lines(MULTI30K, "en", "train", 400), 200)
    (root / "source.spm").write_bytes(src)
    (root / "target.spm").write_bytes(tgt)
    pieces = list(dict.fromkeys(spm_pieces(src) + spm_pieces(tgt)))
    (root / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(["</s>", "<unk>", *pieces, "<pad>"])}),
                                     encoding="utf-8")
    tok = transformers.MarianTokenizer(str(root / "source.spm"), str(root / "target.spm"), str(root / "vocab.json"))
    config = transformers.MarianConfig(
        vocab_size=len(tok.encoder), d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=96,
        pad_token_id=tok.pad_token_id, decoder_start_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
        forced_eos_token_id=None, scale_embedding=True, dropout=0.0, init_std=0.25)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 1.0)
    model.save_pretrained(root / "hf")
    tok.save_pretrained(root / "hf")
    assert main(["import-hf", str(root / "hf"), "--out", str(root / "aiayn")]) == 0
    return model, tok, root / "aiayn"


@pytest.mark.filterwarnings("ignore::UserWarning")  # "Recommended: pip install sacremoses"
def test_marian_score_is_transformers_loss(marian):
    model, tok, aiayn_dir = marian
    sources, targets = multi30k_lines(MULTI30K, "de", "val", 6), multi30k_lines(MULTI30K, "en", "val", 6)
    targets[2] = ""  # the empty translation: </s> alone, for both
    scores = Translator.from_pretrained(aiayn_dir).score(sources, targets, batch_size=4)
    for source, target, s in zip(sources, targets, scores):
        batch = tok([source], text_target=[target], return_tensors="pt")
        with torch.no_grad():
            loss = float(model(**batch).loss)  # mean token NLL, no label smoothing
        assert len(s.tokens) == batch["labels"].size(1)
        assert -s.log_prob / len(s.tokens) == pytest.approx(loss, abs=1e-4)

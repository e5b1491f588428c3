"""The CTranslate2 engine behind the Translator: same results as the native engine, a cache that follows
the weights, clear refusals for what it cannot do."""

import json
import shutil

import pytest
import torch

from aiayn.checkpoint import EXPORT_MARKER, load_checkpoint, save_checkpoint
from aiayn.cli import main
from aiayn.decoding.ct2_engine import ended_before
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError

ctranslate2 = pytest.importorskip("ctranslate2")

SENTENCES = ["forty five thousand six hundred twenty one", "nine", "three hundred thousand two", "",
             "seven hundred ninety six thousand", "fifty six", "thirty"]


@pytest.fixture
def model_dir(transformer_dir, tmp_path):
    """A copy: the engine writes its cache into the model directory, and some tests change the weights."""
    return shutil.copytree(transformer_dir, tmp_path / "model")


@pytest.fixture
def short(model_dir):
    """Output limit |x| + 4: the untrained model runs to it, and the tests stay fast."""
    text = (model_dir / "config.yaml").read_text(encoding="utf-8").replace("max_len_b: 50", "max_len_b: 4")
    (model_dir / "config.yaml").write_text(text, encoding="utf-8")
    return model_dir


def _same(native, ct2, score_tolerance):
    for a, b in zip(native, ct2, strict=True):
        assert (b.text, b.tokens, b.src_tokens) == (a.text, a.tokens, a.src_tokens)
        assert [t for t, _ in b.n_best] == [t for t, _ in a.n_best]
        # CTranslate2 renormalizes the softmax without <pad> and <s>; aiayn does not: its scores are a
        # little higher (by that probability mass, which a trained model makes negligible)
        for (_, sa), (_, sb) in zip(a.n_best, b.n_best) if score_tolerance is not None else ():
            assert sa - 1e-4 <= sb <= sa + score_tolerance * abs(sa) + 1e-4


def test_fp32_greedy_equals_native_greedy(short):
    native = Translator.from_pretrained(short)
    ct2 = Translator.from_pretrained(short, engine="ct2", compute_type="float32")
    assert ct2.engine == "ct2" and (short / "ct2" / "fp32" / "model.bin").is_file()
    # scores: CTranslate2 normalizes by |Y|^alpha, aiayn's hf form (the model's default form is gnmt)
    a = native.translate(SENTENCES, beam=1, length_penalty_form="hf")
    b = ct2.translate(SENTENCES, beam=1, batch_size=3)
    assert any(len(r.tokens) > 3 for r in a)  # real outputs, not only blanks
    _same(a, b, score_tolerance=0.1)
    assert b[3].text == "" and b[3].n_best == [("", 0.0)]  # a blank line stays blank


def test_beam_hf_equals_native_beam_hf(short):
    native = Translator.from_pretrained(short)
    ct2 = Translator.from_pretrained(short, engine="ct2", compute_type="float32")
    options = dict(beam=4, n_best=3, alpha=0.6, length_penalty_form="hf", early_stopping=True)
    _same(native.translate(SENTENCES, **options), ct2.translate(SENTENCES, **options), score_tolerance=0.1)


def test_max_output_len_caps_like_native(short):
    native = Translator.from_pretrained(short)
    ct2 = Translator.from_pretrained(short, engine="ct2")
    a = native.translate(SENTENCES, beam=1, max_output_len=3, length_penalty_form="hf")
    b = ct2.translate(SENTENCES, beam=1, max_output_len=3)
    assert max(len(r.tokens) for r in b) <= 3
    _same(a, b, score_tolerance=0.1)


def test_cli_translate_with_ct2_prints_native_greedy(short, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    outputs = {}
    for engine in ("native", "ct2"):
        out = tmp_path / f"{engine}.txt"
        assert main(["translate", "--model", str(short), "--input", str(tmp_path / "in.txt"), "--output", str(out),
                     "--beam", "1", "--engine", engine]) == 0
        outputs[engine] = out.read_text(encoding="utf-8")
    assert outputs["ct2"] == outputs["native"]
    assert len(outputs["ct2"].splitlines()) == len(SENTENCES)


def test_stale_cache_is_exported_again(short):
    first = Translator.from_pretrained(short, engine="ct2").translate(SENTENCES, beam=1)
    marker = json.loads((short / "ct2" / "fp32" / EXPORT_MARKER).read_text(encoding="utf-8"))
    model, cfg, tokenizer = load_checkpoint(short)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    save_checkpoint(short, model, cfg, tokenizer)  # new weights, same directory
    again = Translator.from_pretrained(short, engine="ct2").translate(SENTENCES, beam=1)
    new_marker = json.loads((short / "ct2" / "fp32" / EXPORT_MARKER).read_text(encoding="utf-8"))
    assert new_marker["sources"]["model.safetensors"]["sha256"] != marker["sources"]["model.safetensors"]["sha256"]
    assert [r.text for r in again] != [r.text for r in first]
    _same(Translator.from_pretrained(short).translate(SENTENCES, beam=1, length_penalty_form="hf"), again,
          score_tolerance=0.1)


def test_fresh_cache_is_not_exported_again(short, monkeypatch):
    Translator.from_pretrained(short, engine="ct2")
    model_bin = short / "ct2" / "fp32" / "model.bin"
    before = model_bin.stat().st_mtime_ns
    (short / "model.safetensors").touch()  # same bytes, new mtime: still fresh (the hash decides)
    Translator.from_pretrained(short, engine="ct2", compute_type="int8")
    assert model_bin.stat().st_mtime_ns == before


def test_foreign_files_in_the_cache_are_never_replaced(short):
    (short / "ct2" / "fp32").mkdir(parents=True)
    (short / "ct2" / "fp32" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(AiaynError, match="CTranslate2 cache"):
        Translator.from_pretrained(short, engine="ct2")
    assert (short / "ct2" / "fp32" / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_symlinked_cache_is_never_written_through(short, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (short / "ct2").symlink_to(mine)
    with pytest.raises(AiaynError, match="not the plain directory"):
        Translator.from_pretrained(short, engine="ct2")
    assert list(mine.iterdir()) == []


def test_attention_with_ct2_is_a_clear_error(short):
    ct2 = Translator.from_pretrained(short, engine="ct2")
    with pytest.raises(AiaynError, match="attention maps need the native engine"):
        ct2.translate(["nine"], return_attention=True)


def test_gnmt_length_penalty_with_ct2_is_refused(short, tmp_path, capsys):
    ct2 = Translator.from_pretrained(short, engine="ct2")
    with pytest.raises(AiaynError, match="hf"):
        ct2.translate(["nine"], length_penalty_form="gnmt")
    with pytest.raises(AiaynError, match="beam-size finished hypotheses"):
        ct2.translate(["nine"], early_stopping=False)
    assert ct2.resolve().early_stopping is True and ct2.resolve(early_stopping=True).early_stopping is True
    assert ct2.resolve().length_penalty_form == "hf"  # the model's default (gnmt) becomes CTranslate2's form
    assert ct2.resolve(length_penalty_form="gnmt", alpha=0.0).length_penalty_form == "hf"  # alpha 0: both are 1
    (tmp_path / "in.txt").write_text("nine\n", encoding="utf-8")
    code = main(["translate", "--model", str(short), "--input", str(tmp_path / "in.txt"), "--engine", "ct2",
                 "--length-penalty-form", "gnmt"])
    assert code == 2 and "--length-penalty-form hf" in capsys.readouterr().err
    code = main(["translate", "--model", str(short), "--input", str(tmp_path / "in.txt"), "--engine", "ct2",
                 "--no-early-stopping"])
    assert code == 2 and "--no-early-stopping" in capsys.readouterr().err


@pytest.mark.parametrize("args, option", [(["--engine", "ct2", "--compute-type", "int3"], "--compute-type"),
                                          (["--compute-type", "int8_float32"], "--compute-type int8_float32"),
                                          (["--engine", "ct3"], "--engine")])
def test_bad_compute_type_is_a_clear_error(short, tmp_path, capsys, args, option):
    (tmp_path / "in.txt").write_text("nine\n", encoding="utf-8")
    assert main(["translate", "--model", str(short), "--input", str(tmp_path / "in.txt"), *args]) == 2
    err = capsys.readouterr().err
    assert option in err and "Traceback" not in err
    assert not (short / "ct2").exists()  # refused before any export


def test_rnn_with_ct2_is_refused(rnn_dir):
    with pytest.raises(AiaynError, match="Transformer"):
        Translator.from_pretrained(rnn_dir, engine="ct2")


@pytest.mark.parametrize("controls", [{"min_length": 6}, {"no_repeat_ngram_size": 2},
                                      {"target_prefix": ["sieben", "", "drei hundert", "", "", "", "x"]}])
@pytest.mark.parametrize("beam", [1, 4])
def test_decoding_controls_mean_the_same_in_both_engines(short, controls, beam):
    native = Translator.from_pretrained(short)
    ct2 = Translator.from_pretrained(short, engine="ct2", compute_type="float32")
    options = dict(beam=beam, alpha=0.6, length_penalty_form="hf", **controls)
    a, b = native.translate(SENTENCES, **options), ct2.translate(SENTENCES, **options)
    # Same outputs; the scores follow each engine's convention. CTranslate2 bans repeated n-grams before
    # its softmax, so its scores renormalize over the tokens left (aiayn bans them in the log-probs, as
    # fairseq and transformers do), and leaves a forced prefix out of the score (aiayn's score is the
    # whole output's under the model)
    # (with beam > 1 the renormalized scores rank hypotheses differently: there, only the ban is checked)
    if "no_repeat_ngram_size" in controls and beam > 1:
        for r in a + b:
            bigrams = list(zip(r.tokens, r.tokens[1:]))
            assert len(bigrams) == len(set(bigrams))
    else:
        tolerance = {"no_repeat_ngram_size": 1.0, "target_prefix": None}.get(next(iter(controls)), 0.1)
        _same(a, b, score_tolerance=tolerance)
    if "min_length" in controls:
        assert all(len(r.tokens) >= 6 for r, s in zip(a, SENTENCES) if s)
    if "target_prefix" in controls:
        tok = native.tokenizer
        for r, prefix in zip(a, controls["target_prefix"]):
            ids = tok.encode_target([prefix])[0]
            assert [tok.piece_to_id(p) for p in r.tokens[: len(ids)]] == ids


def test_token_budget_batches_give_the_same_translations(short):
    native = Translator.from_pretrained(short)
    ct2 = Translator.from_pretrained(short, engine="ct2", compute_type="float32")
    for engine in (native, ct2):
        by_count = engine.translate(SENTENCES, beam=4, length_penalty_form="hf")
        by_tokens = engine.translate(SENTENCES, beam=4, length_penalty_form="hf", max_tokens=12)
        assert [r.text for r in by_tokens] == [r.text for r in by_count]


def test_ended_before_its_limit_means_a_step_to_spare():
    hypotheses = [([5, 6, 7], -1.0), ([5, 6, 7, 8, 9], -2.0)]  # the longest: 5 tokens, </s> at step 5
    assert ended_before(hypotheses, 7)  # steps 0..6: step 5 was not the last
    assert not ended_before(hypotheses, 6)  # step 5 is the last: every live hypothesis is cut there


class CallSpy:
    """Stands for a ctranslate2.Translator and records (sentences, max_decoding_length) of each call."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def translate_batch(self, batch, *args, **kwargs):
        self.calls.append((len(batch), kwargs["max_decoding_length"]))
        return self.model.translate_batch(batch, *args, **kwargs)


@pytest.fixture
def early_eos(model_dir):
    """The untrained model with its </s> row scaled up: some sentences end within a few tokens, others run
    to their limit |x| + 50, so one batch mixes both."""
    model, cfg, tokenizer = load_checkpoint(model_dir)
    with torch.no_grad():
        model.tgt_embed.weight[tokenizer.eos_id] *= 12
    save_checkpoint(model_dir, model, cfg, tokenizer)
    return model_dir


def test_one_call_then_only_the_sentences_that_reached_their_limit(early_eos):
    """CTranslate2's length limit is per call: all sentences go in one call at the largest limit, and only
    those whose search reached their own limit are decoded again with it. The results equal the native
    engine's, whose limit is per sentence."""
    sentences = SENTENCES + ["one", "two thousand", "eighty eight", "twelve thousand", "sixty"]
    native = Translator.from_pretrained(early_eos)
    ct2 = Translator.from_pretrained(early_eos, engine="ct2", compute_type="float32")
    spy = CallSpy(ct2.backend.model)
    ct2.backend.model = spy
    options = dict(beam=4, n_best=2, alpha=0.6, length_penalty_form="hf", early_stopping=True)
    a, b = native.translate(sentences, **options), ct2.translate(sentences, **options)
    _same(a, b, score_tolerance=0.1)
    lengths = [len(r.tokens) for r in a if r.src_tokens]
    assert any(n < 10 for n in lengths) and any(n >= 50 for n in lengths)  # the mix this test is about
    first, *again = spy.calls  # (sentences, max_decoding_length) of each call
    assert first == (len(lengths), max(limit for _, limit in spy.calls))  # all, at the largest limit
    assert 0 < sum(n for n, _ in again) < len(lengths)  # some decoded again, the early-ended ones not


def test_workers_are_inter_threads_with_even_batches(short):
    """--workers with --engine ct2: CTranslate2's inter_threads, fed batches the workers finish together
    (even_batch_size: 6 sentences at batch 4 -> 2 batches of 3, not 4 + 2); the results are unchanged."""
    alone = Translator.from_pretrained(short, engine="ct2", compute_type="float32")
    pooled = Translator.from_pretrained(short, engine="ct2", compute_type="float32", workers=2)
    assert pooled.backend.model.num_translators == 2 and pooled.pool is None  # CTranslate2's inter_threads
    sizes = []
    translate_batch = pooled.backend.model.translate_batch

    class Recorded:  # a ctranslate2.Translator's attributes cannot be replaced: stand in for it
        def translate_batch(self, batch, *args, max_batch_size, **kwargs):
            sizes.append(max_batch_size)
            return translate_batch(batch, *args, max_batch_size=max_batch_size, **kwargs)

    pooled.backend.model = Recorded()
    options = dict(beam=2, n_best=2, batch_size=4)
    _same(alone.translate(SENTENCES, **options), pooled.translate(SENTENCES, **options), score_tolerance=0)
    assert sizes and set(sizes) == {3}


@pytest.mark.parametrize("damage", ["truncate", "alter", "remove"])
def test_a_damaged_cache_is_exported_again(short, caplog, damage):
    """A truncated, altered or missing file of the export (its sizes and hashes are recorded at export) is
    exported again, with one warning, and translates as a fresh export does."""
    fresh = Translator.from_pretrained(short, engine="ct2").translate(SENTENCES, beam=1)
    model_bin = short / "ct2" / "fp32" / "model.bin"
    data = model_bin.read_bytes()
    if damage == "truncate":
        model_bin.write_bytes(data[: len(data) // 2])
    elif damage == "alter":
        model_bin.write_bytes(data[:-4] + bytes(4 * [0xFF]))  # same size, new bytes (and mtime)
    else:
        model_bin.unlink()
    again = Translator.from_pretrained(short, engine="ct2").translate(SENTENCES, beam=1)
    assert [(r.text, r.n_best) for r in again] == [(r.text, r.n_best) for r in fresh]
    assert model_bin.read_bytes() == data
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and warnings[0].startswith(f"the CTranslate2 cache {short / 'ct2' / 'fp32'} is damaged")


def test_an_unwritable_model_directory_is_one_line_naming_the_way_out(short, monkeypatch, capsys):
    import errno

    import aiayn.interop.ctranslate2 as ctranslate2

    def full(model, cfg, tokenizer, out):
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "model.bin"))

    monkeypatch.setattr(ctranslate2, "write_ctranslate2", full)
    (short.parent / "in.txt").write_text("nine\n", encoding="utf-8")
    code = main(["translate", "--model", str(short), "--input", str(short.parent / "in.txt"), "--engine", "ct2"])
    err = capsys.readouterr().err
    assert code == 2 and err == (f"aiayn translate: error: cannot write the CTranslate2 cache in {short / 'ct2'} (no "
                                 f"space left on the device; nothing was written); make room or make the model "
                                 f"directory writable, or use --engine native\n")
    assert not (short / "ct2" / "fp32").exists()

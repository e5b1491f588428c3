import json

import numpy as np
import pytest
import torch

from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.inspect.maps.capture import capture, hard_alignment, merge_subwords, word_groups
from aiayn.inspect.maps.files import write_maps
from aiayn.inspect.steps.qkv import attention_step

SENTENCE = "three hundred forty five thousand twenty one"


def test_beam_capture_equals_teacher_forced_capture(transformer_dir):
    t = Translator.from_pretrained(transformer_dir)
    searched = capture(t, SENTENCE, beam=2)
    tok = t.tokenizer
    src = torch.tensor([[tok.sp.piece_to_id(p) for p in searched.source_tokens]])
    tgt_in = torch.tensor([[tok.sp.piece_to_id(p) for p in searched.target_input_tokens]])
    assert tgt_in[0, 0] == tok.bos_id
    with torch.no_grad():
        _, forced = t.model(src, tgt_in, return_attention=True)
    forced = {k: v[0].numpy() for k, v in forced.items()}
    L, H = searched.maps["cross"].shape[:2]
    assert set(searched.maps) == {"encoder_self", "decoder_self", "cross"}
    S, T = len(searched.source_tokens), len(searched.target_tokens)
    assert searched.maps["cross"].shape == (L, H, T, S)
    assert searched.maps["decoder_self"].shape == (L, H, T, T)
    assert searched.maps["encoder_self"].shape == (L, H, S, S)
    for kind in searched.maps:  # cached decoding during the search = one teacher-forced pass
        np.testing.assert_allclose(searched.maps[kind], forced[kind], atol=1e-5)
        np.testing.assert_allclose(searched.maps[kind].sum(-1), 1.0, atol=1e-5)


def test_merge_words_and_alignment(transformer_dir):
    t = Translator.from_pretrained(transformer_dir)
    maps = capture(t, SENTENCE, target="drei hundert fünf und vierzig tausend ein und zwanzig")
    merged = merge_subwords(maps)
    assert merged.source_tokens == SENTENCE.split() + ["</s>"]
    for m in merged.maps.values():
        np.testing.assert_allclose(m.sum(-1), 1.0, atol=1e-5)
    words, groups = word_groups(["▁fünf", "und", "▁vier", "zig", "</s>"])
    assert words == ["fünfund", "vierzig", "</s>"] and groups == [[0, 1], [2, 3], [4]]
    pairs = hard_alignment(merged, layer=0, heads=[0, 1]).split()
    assert len(pairs) == len(merged.target_tokens) - 1
    assert all(0 <= int(p.split("-")[0]) < len(SENTENCE.split()) for p in pairs)
    with pytest.raises(ValueError, match="layer 9 out of range"):
        hard_alignment(merged, layer=9)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".png", ".html", ".npz", ".json", ".align"])
def test_write_every_format(transformer_dir, tmp_path, suffix):
    maps = capture(Translator.from_pretrained(transformer_dir), SENTENCE, beam=2)
    path = write_maps(maps, tmp_path / f"a{suffix}", kind="all")
    data = path.read_bytes()
    assert len(data) > (3 if suffix == ".align" else 100) and not list(tmp_path.glob(".*tmp*"))
    if suffix == ".align":
        assert all(len(pair.split("-")) == 2 for pair in data.decode().split())
    if suffix == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    if suffix == ".json":
        body = json.loads(data)
        assert body["schema_version"] == 2 and np.array(body["maps"]["cross"]).ndim == 4
        assert set(body["maps"]) == set(maps.maps) == set(body["selection"])
    if suffix == ".npz":
        z = np.load(path)
        assert json.loads(str(z["meta"]))["source_tokens"] == maps.source_tokens
        np.testing.assert_allclose(z["cross"], maps.maps["cross"])


def test_bad_requests_are_clear(transformer_dir, tmp_path):
    maps = capture(Translator.from_pretrained(transformer_dir), "nine", beam=1)
    with pytest.raises(ValueError, match="unknown extension"):
        write_maps(maps, tmp_path / "a.gif")
    with pytest.raises(ValueError, match="--head 7 out of range"):
        write_maps(maps, tmp_path / "a.png", head=7)
    with pytest.raises(ValueError, match="empty"):
        capture(Translator.from_pretrained(transformer_dir), "  ")


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_data_files_hold_the_selected_kind_layer_and_head(transformer_dir, tmp_path, suffix):
    """--kind/--layer/--head select what .json/.npz hold; the shape stays (L, H, Q, K) and `selection`
    names the model's layer and head of each row kept."""
    maps = capture(Translator.from_pretrained(transformer_dir), SENTENCE, beam=2)
    path = write_maps(maps, tmp_path / f"a{suffix}", kind="decoder_self", layer=1, head=2)
    if suffix == ".json":
        body = json.loads(path.read_text())
        kept, meta = {k: np.array(v) for k, v in body["maps"].items()}, body
    else:
        z = np.load(path)
        meta = json.loads(str(z["meta"]))
        kept = {k: z[k] for k in z.files if k != "meta"}
    assert set(kept) == {"decoder_self"}
    np.testing.assert_allclose(kept["decoder_self"], maps.maps["decoder_self"][1:2, 2:3], atol=1e-5)
    assert meta["selection"] == {"decoder_self": {"layers": [1], "heads": [2]}}
    everything = write_maps(maps, tmp_path / f"b{suffix}", kind="all")  # default: every layer and head
    meta = json.loads(everything.read_text())["selection"] if suffix == ".json" else \
        json.loads(str(np.load(everything)["meta"]))["selection"]
    L, H = maps.maps["cross"].shape[:2]
    assert meta["cross"] == {"layers": list(range(L)), "heads": list(range(H))}


@pytest.mark.parametrize("suffix", [".png", ".html", ".npz", ".json", ".align"])
@pytest.mark.parametrize("request_, needle", [(dict(layer=2), "--layer 2 out of range"),
                                               (dict(head=-1), "--head -1 out of range"),
                                               (dict(head=4), "--head 4 out of range")])
def test_out_of_range_layer_or_head_is_an_error_for_every_format(transformer_dir, tmp_path, suffix, request_,
                                                                 needle):
    maps = capture(Translator.from_pretrained(transformer_dir), "nine", beam=1)  # tiny: 2 layers, 4 heads
    with pytest.raises(AiaynError, match=needle):
        write_maps(maps, tmp_path / f"a{suffix}", **request_)
    assert not list(tmp_path.iterdir())


def test_rnn_capture_has_cross_attention_per_step(rnn_dir, tmp_path):
    maps = capture(Translator.from_pretrained(rnn_dir), SENTENCE, beam=2)
    assert set(maps.maps) == {"cross"}
    assert maps.maps["cross"].shape == (1, 1, len(maps.target_tokens), len(maps.source_tokens))
    np.testing.assert_allclose(maps.maps["cross"].sum(-1), 1.0, atol=1e-5)
    assert write_maps(maps, tmp_path / "rnn.png").exists()
    for suffix in (".png", ".html", ".json", ".npz", ".align"):
        with pytest.raises(AiaynError, match="no encoder_self|cross-attention"):
            write_maps(maps, tmp_path / f"rnn2{suffix}", kind="encoder_self")
        assert not (tmp_path / f"rnn2{suffix}").exists()
    with pytest.raises(AiaynError, match="--layer 1 out of range"):
        write_maps(maps, tmp_path / "rnn.align", layer=1)


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_step_view_reproduces_the_captured_row(transformer_dir, kind):
    t = Translator.from_pretrained(transformer_dir)
    maps = capture(t, SENTENCE, beam=2)
    tok = t.tokenizer
    src_ids = [tok.sp.piece_to_id(p) for p in maps.source_tokens]
    tgt_in = [tok.bos_id] + [tok.sp.piece_to_id(p) for p in maps.target_input_tokens[1:]]
    query = 1
    step = attention_step(t.model, src_ids, tgt_in, kind, layer=1, head=2, query=query)
    row = maps.maps[kind][1, 2, query]
    np.testing.assert_allclose(step["weights"], row, atol=1e-5)
    scores = np.array([-np.inf if s is None else s for s in step["scores"]])  # None: masked (-inf)
    np.testing.assert_allclose(np.exp(scores) / np.exp(scores).sum(), step["weights"], atol=1e-5)
    expected = np.array(step["weights"]) @ np.array(step["values"])
    np.testing.assert_allclose(step["output"], expected, atol=1e-4)


def test_teacher_forced_input_longer_than_the_model_is_an_error(transformer_dir):
    t = Translator.from_pretrained(transformer_dir)
    long = " ".join(["nine"] * 1100)  # tiny preset: 1024 positions
    with pytest.raises(AiaynError, match=r"--target has \d+ subword tokens .* more than the model's 1024"):
        capture(t, "nine", target=long)
    with pytest.raises(AiaynError, match=r"the sentence has \d+ subword tokens"):
        capture(t, long, target="neun")


@pytest.mark.slow
def test_html_and_png_say_what_they_show(transformer_dir, rnn_dir, tmp_path):
    """Rendered maps name their rows by the decoder input and the token it predicts, show pieces without
    SentencePiece's ▁, draw the decoder's masked future as masked, and call the RNN's map what it is."""
    from aiayn.inspect.maps.labels import axis_labels, masked_cells, panel_title, sentence_title

    maps = capture(Translator.from_pretrained(transformer_dir), SENTENCE, beam=2)
    T = len(maps.target_tokens)
    page = write_maps(maps, tmp_path / "a.html", kind="decoder_self", layer=1, head=2).read_text()
    assert page.count('class="m"') == T * (T - 1) // 2 and "key: decoder input" in page
    assert "▁" not in page and "layer 2 · head 3" in page  # 0-based indices, titles counted from 1
    rows, keys = axis_labels(maps, "cross")
    assert rows[0].startswith("<s> → ") and keys == [p.lstrip("▁") for p in maps.source_tokens]
    masked = masked_cells(maps, "decoder_self", maps.maps["decoder_self"][0, 0])
    assert masked.sum() == T * (T - 1) // 2 and masked_cells(maps, "cross", maps.maps["cross"][0, 0]) is None
    merged = merge_subwords(capture(Translator.from_pretrained(transformer_dir), SENTENCE,
                                    target="drei hundert fünf und vierzig tausend ein und zwanzig"))
    assert masked_cells(merged, "decoder_self", merged.maps["decoder_self"][0, 0]).sum() > 0
    assert "a word starts at a piece" in write_maps(merged, tmp_path / "w.html", kind="all").read_text()
    rnn = capture(Translator.from_pretrained(rnn_dir), "forty five", beam=1)
    assert panel_title(rnn, "cross", 0, 0) == "RNN decoder attention over the encoder states"
    assert "cross L0" not in write_maps(rnn, tmp_path / "r.html").read_text()
    assert "given target" in sentence_title(merged) and "given target" not in sentence_title(maps)
    assert write_maps(maps, tmp_path / "a.png", kind="decoder_self", layer=1).read_bytes()[:4] == b"\x89PNG"

import pytest

from aiayn.cli import main
from aiayn.decoding.batches import encode_sources, pad_batch
from aiayn.decoding.greedy import greedy_decode
from aiayn.decoding.translator import Translator

ctranslate2 = pytest.importorskip("ctranslate2")


def test_ctranslate2_export_decodes_like_aiayn(transformer_dir, tmp_path):
    assert main(["export", "--model", str(transformer_dir), "--out", str(tmp_path / "ct2")]) == 0
    t = Translator.from_pretrained(transformer_dir)
    tok = t.tokenizer
    sentences = ["forty five thousand six hundred twenty one", "nine", "three hundred thousand two"]
    sources = encode_sources(tok, sentences)
    ct = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    # aiayn never outputs <pad> or <s>; CTranslate2 is told the same
    results = ct.translate_batch([tok.id_to_piece(s) for s in sources], beam_size=1, max_decoding_length=12,
                                 suppress_sequences=[["<pad>"], ["<s>"]])
    hyps, _ = greedy_decode(t.model, pad_batch(sources, tok.pad_id, "cpu"), tok.bos_id, tok.eos_id, tok.pad_id,
                            max_len_b=12)
    for result, hyp in zip(results, hyps):
        n = min(len(hyp), 11)  # CTranslate2 counts the length limit slightly differently
        assert result.hypotheses[0][:n] == tok.id_to_piece(hyp)[:n]


def test_rnn_export_is_refused(rnn_dir, tmp_path, capsys):
    assert main(["export", "--model", str(rnn_dir), "--out", str(tmp_path / "x")]) == 2
    assert "Transformer" in capsys.readouterr().err

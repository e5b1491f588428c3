"""The SentencePiece models aiayn trains: byte fallback (data.byte_fallback) and separate source/target
vocabularies (data.joint_vocab: false), down to a run that trains, translates and resumes with them."""

import json

import pytest
import yaml

from aiayn.checkpoint import load_checkpoint
from aiayn.cli import main
from aiayn.config import ConfigError, load_config
from aiayn.config_text import config_yaml
from aiayn.data.separate_tokenizer import SeparateTokenizer
from aiayn.data.synthetic import number_task
from aiayn.data.tokenizer import BYTE_FALLBACK_MIN_VOCAB, Tokenizer, load_dir
from aiayn.decoding.translator import Translator
from aiayn.training.run import check_same_run
from tests.model_helpers import model_dir

UNSEEN = "forty ŋ żółw 🙂 nine"  # the built-in task's text has none of these letters, nor the emoji


@pytest.fixture(scope="module")
def pairs():
    return number_task(300, 10, 10, seed=1)["train"]


def test_byte_fallback_round_trips_unseen_characters(pairs):
    sentences = [s for p in pairs for s in p]
    tok = Tokenizer.train(sentences, BYTE_FALLBACK_MIN_VOCAB, byte_fallback=True)
    ids = tok.encode([UNSEEN])[0]
    assert tok.unk_id not in ids and "<0xF0>" in tok.id_to_piece(ids)  # the emoji's first byte
    assert tok.decode(ids) == UNSEEN
    assert Tokenizer(tok.proto).decode(ids + [tok.eos_id]) == UNSEEN  # reloaded; specials dropped
    without = Tokenizer.train(sentences, 64, byte_fallback=False)
    assert without.unk_id in without.encode([UNSEEN])[0] and without.decode(without.encode([UNSEEN])[0]) != UNSEEN


def test_separate_tokenizers_have_their_own_tables_and_byte_fallback(pairs, tmp_path):
    tok = SeparateTokenizer.train([p[0] for p in pairs], [p[1] for p in pairs], BYTE_FALLBACK_MIN_VOCAB, True)
    assert (tok.pad_id, tok.unk_id, tok.eos_id, tok.bos_id) == (0, 1, 2, 0)  # the decoder starts from <pad>
    assert tok.id_to_piece([0, 1, 2]) == ["<pad>", "<unk>", "</s>"] == tok.source_id_to_piece([0, 1, 2])
    assert "vier" in tok.decode(tok.encode_target(["vierzig"])[0])
    assert tok.source_piece_to_id("▁forty") != tok.unk_id and tok.piece_to_id("▁forty") == tok.unk_id
    ids = tok.encode_target([UNSEEN])[0]
    assert tok.unk_id not in ids and tok.decode(ids) == UNSEEN
    for name, data in tok.files().items():
        (tmp_path / name).write_bytes(data)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["separate_vocabs"] is True
    again = load_dir(tmp_path)
    assert isinstance(again, SeparateTokenizer) and again.proto == tok.proto
    assert again.encode_source([UNSEEN]) == tok.encode_source([UNSEEN])


def test_byte_fallback_needs_a_large_enough_vocabulary():
    with pytest.raises(ConfigError, match=r"data.byte_fallback=true needs data.vocab_size >= 384.*"
                                          r"data.vocab_size=128"):
        load_config(None, ["data.vocab_size=128"])
    load_config(None, ["data.vocab_size=128", "data.byte_fallback=false"])
    load_config(None, [f"data.vocab_size={BYTE_FALLBACK_MIN_VOCAB}"])


def test_separate_vocabularies_cannot_share_embeddings():
    with pytest.raises(ConfigError, match="model.share_embeddings=true.*data.joint_vocab=false"):
        load_config(None, ["data.joint_vocab=false", "model.share_embeddings=true"])


def test_a_run_older_than_byte_fallback_resumes_without_it(tmp_path):
    """Its config.yaml has no data.byte_fallback and its tokenizer no byte pieces: it resumes with the
    default config (byte_fallback true), which then records false; other differences are still refused."""
    cfg = load_config(None, [])
    saved = yaml.safe_load(config_yaml(cfg))
    del saved["data"]["byte_fallback"], saved["data"]["joint_vocab"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    check_same_run(tmp_path, cfg, "fingerprint")
    assert cfg.data.byte_fallback is False
    with pytest.raises(Exception, match="data.joint_vocab: True in the run, False now"):
        check_same_run(tmp_path, load_config(None, ["data.joint_vocab=false"]), "fingerprint")


TINY = ["data.synthetic_train=200", "data.synthetic_valid=10", f"data.vocab_size={BYTE_FALLBACK_MIN_VOCAB}",
        "data.byte_fallback=true", "data.joint_vocab=false", "model.share_embeddings=false", "model.d_model=32",
        "model.d_ff=64", "train.max_tokens=512", "train.num_threads=1", "train.eval_every=2", "train.save_every=2",
        "train.average_last=1", "train.bleu_sentences=5"]


def test_a_run_with_separate_vocabularies_trains_translates_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["train", "--out", str(out)] + [x for s in TINY for x in ("--set", s)]
    assert main(argv + ["--set", "train.max_steps=2"]) == 0, capsys.readouterr().err
    assert not (out / "tokenizer.model").exists()
    assert {"source.spm", "target.spm", "vocab.json", "target_vocab.json"} <= {p.name for p in out.iterdir()}
    model, cfg, tok = load_checkpoint(out / "checkpoints" / "step_00000002")
    assert isinstance(tok, SeparateTokenizer)
    assert (cfg.model.src_vocab_size, cfg.model.tgt_vocab_size) == (tok.src_vocab_size, tok.tgt_vocab_size)
    assert model.src_embed.weight.shape[0] == tok.src_vocab_size
    assert model.tgt_embed.weight.shape[0] == tok.tgt_vocab_size
    assert tok.unk_id not in tok.encode_source(["forty ż nine"])[0]  # byte fallback on the source side too
    translator = Translator.from_pretrained(out / "checkpoints" / "step_00000002")
    result = translator.translate(["forty ż nine"], beam=2, max_output_len=8)[0]
    assert isinstance(result.text, str) and tok.pad_id not in result.tokens
    capsys.readouterr()
    assert main(argv + ["--set", "train.max_steps=4"]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "resuming from" in captured.out + captured.err
    assert (out / "checkpoints" / "step_00000004").is_dir()


def test_lowercase_tokenizers_fold_case_in_training_and_at_every_encode(pairs):
    from aiayn.config import DataConfig
    from aiayn.training.run import _train_tokenizer

    cased = [(s.capitalize(), t.upper()) for s, t in pairs]  # the built-in task's text is lowercase
    joint = Tokenizer(_train_tokenizer(DataConfig(vocab_size=400, lowercase=True), cased)["tokenizer.model"])
    pieces = [p for p in joint.id_to_piece(list(range(joint.vocab_size))) if not p.startswith("<")]  # not <0xF0>
    assert not any(c.isupper() for c in "".join(pieces))
    assert joint.decode(joint.encode(["Forty NINE"])[0]) == "forty nine"
    kept = Tokenizer(_train_tokenizer(DataConfig(vocab_size=400), cased)["tokenizer.model"])
    assert kept.decode(kept.encode(["Forty NINE"])[0]) == "Forty NINE"  # the default keeps case
    separate = SeparateTokenizer.train([s for s, _ in cased], [t for _, t in cased], 400, True, lowercase=True)
    assert separate.decode(separate.encode_target(["VIERZIG"])[0]) == "vierzig"
    assert "▁forty" in separate.source_id_to_piece(separate.encode_source(["Forty"])[0])
    assert joint.folds_case and separate.folds_case and not kept.folds_case  # what aiayn evaluate reads


def test_evaluate_says_when_a_model_writes_lowercase(pairs, transformer_dir, tmp_path, capsys):
    lowercase = Tokenizer.train([s for p in pairs for s in p], 128, byte_fallback=False, lowercase=True)
    lc_dir = model_dir(tmp_path / "lc", lowercase, "tiny")
    (tmp_path / "src.txt").write_text("Forty nine\n")
    (tmp_path / "ref.txt").write_text("Neun und vierzig\n")
    args = ["--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"), "--bootstrap", "0"]
    assert main(["evaluate", "--model", str(lc_dir)] + args) == 0
    assert "this model writes lowercased text (trained with data.lowercase): read BLEU-lc" in capsys.readouterr().out
    assert main(["evaluate", "--model", str(lc_dir), "--json"] + args) == 0
    assert json.loads(capsys.readouterr().out)["lowercase_model"] is True
    assert main(["evaluate", "--model", str(transformer_dir), "--json"] + args) == 0  # a cased model: no note
    assert "lowercase_model" not in json.loads(capsys.readouterr().out)


def test_a_few_sentences_encode_as_a_batch_does(pairs):
    """Up to FEW_SENTENCES are encoded one by one (no thread pool per call), more as one batch: same ids."""
    from aiayn.data.tokenizer import FEW_SENTENCES

    sentences = [s for p in pairs for s in p][: 3 * FEW_SENTENCES] + [UNSEEN, ""]
    tok = Tokenizer.train(sentences, BYTE_FALLBACK_MIN_VOCAB, byte_fallback=True)
    whole = tok.encode(sentences)  # more than FEW_SENTENCES: sentencepiece's batch
    few = [ids for start in range(0, len(sentences), FEW_SENTENCES)
           for ids in tok.encode(sentences[start: start + FEW_SENTENCES])]
    assert few == whole == [tok.sp.encode(s, out_type=int) for s in sentences]

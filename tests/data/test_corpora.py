"""TSV corpora, several weighted and tagged corpora (aiayn/data/corpora.py), and a tag steering the output
language of a model trained on two targets."""

import random
from pathlib import Path

import numpy as np
import pytest

from aiayn.config import load_config
from aiayn.data.batching import Example
from aiayn.data.corpora import MixedCorpus, epoch_batches
from aiayn.data.corpus import CorpusError, iter_tsv
from aiayn.data.datasets import iter_pairs
from aiayn.data.encoded import EncodedCorpus
from aiayn.data.synthetic import english, german
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import ConfigError
from aiayn.inspect.quality.warnings import in_words, input_warnings


def write(path: Path, lines) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def files_config(tmp_path, *sets):
    valid = write(tmp_path / "valid.tsv", ["one\teins"])
    return load_config(None, ["data.dataset=files", f"data.valid={valid}", *sets])


def test_tsv_pairs_and_a_line_without_a_tab(tmp_path):
    good = write(tmp_path / "good.tsv", ["one\teins", " \t ", "two\tzwei"])
    assert list(iter_tsv(good)) == [("one", "eins"), ("two", "zwei")]
    cfg = files_config(tmp_path, f"data.train={good}")
    assert list(iter_pairs(cfg.data, "train")) == [("one", "eins"), ("two", "zwei")]
    assert list(iter_pairs(cfg.data, "valid")) == [("one", "eins")]
    bad = write(tmp_path / "bad.tsv", ["one\teins", "two zwei"])
    with pytest.raises(CorpusError) as err:
        list(iter_tsv(bad))
    print(err.value)
    assert str(err.value).startswith(f"{bad}:2: expected source<TAB>target (exactly one tab), found 0 tabs")


@pytest.mark.parametrize("sets, needle", [
    (["data.corpora=[{tsv: TRAIN, weight: 0}]"], "data.corpora[0].weight=0: must be a number > 0"),
    (["data.corpora=[{tsv: TRAIN}, {tsv: TRAIN, weight: -1.5}]"], "data.corpora[1].weight=-1.5: must be"),
    (["data.corpora=[{tsv: DIR/missing.tsv}]"], "data.corpora[0].tsv: DIR/missing.tsv: file not found"),
    (["data.corpora=[{src: TRAIN}]"], "data.corpora[0]: give either src and tgt (aligned files) or tsv"),
    (["data.corpora=[{tsv: TRAIN}]", "data.train_src=TRAIN", "data.train_tgt=TRAIN"],
     "data.corpora and data.train_src, data.train_tgt are both set"),
    (["data.corpora=[{tsv: TRAIN, tag: 'a b'}]"], "data.corpora[0].tag='a b': must be one word"),
    (["data.corpora=[{tsv: TRAIN, tag: '</s>'}]"], "data.corpora[0].tag='</s>': </s> (the end of a sentence) is a "
     "piece the tokenizer reserves"),
    (["data.corpora=[{tsv: TRAIN, tag: '<pad>'}]"], "data.corpora[0].tag='<pad>': <pad> (padding) is a piece"),
    (["data.corpora=[{tsv: TRAIN, tag: '<unk>'}]"], "data.corpora[0].tag='<unk>': <unk> (an unknown piece) is a"),
    (["data.corpora=[{tsv: TRAIN, tag: '<s>'}]"], "data.corpora[0].tag='<s>': <s> (the start of a sentence) is a"),
    (["data.corpora=[{tsv: TRAIN, tag: '<0x41>'}]"], "data.corpora[0].tag='<0x41>': <0x41> (a byte of text"),
    (["data.train=TRAIN", "data.train_src=TRAIN"], "data.train (a TSV file) and data.train_src are both set"),
])
def test_bad_corpora_are_one_line_naming_the_field(tmp_path, sets, needle):
    train = write(tmp_path / "train.tsv", ["one\teins"])
    sets = [s.replace("TRAIN", train).replace("DIR", str(tmp_path)) for s in sets]
    with pytest.raises(ConfigError) as err:
        files_config(tmp_path, *sets)
    print(err.value)
    assert needle.replace("TRAIN", train).replace("DIR", str(tmp_path)) in str(err.value)
    assert "\n" not in str(err.value)


def test_corpora_are_tagged_and_read_in_order(tmp_path):
    tsv = write(tmp_path / "a.tsv", ["one\teins", "two\tzwei"])
    src, tgt = write(tmp_path / "b.en", ["three"]), write(tmp_path / "b.up", ["DREI"])
    cfg = files_config(tmp_path, f"data.corpora=[{{tsv: {tsv}, tag: '>>de<<'}}, {{src: {src}, tgt: {tgt}, "
                                 f"weight: 2.5, tag: '>>up<<'}}]")
    assert list(iter_pairs(cfg.data, "train")) == [(">>de<< one", "eins"), (">>de<< two", "zwei"),
                                                  (">>up<< three", "DREI")]


def corpus(n: int, offset: int = 0) -> EncodedCorpus:
    return EncodedCorpus.from_examples([Example([offset + i % 5 + 4], [i % 7 + 4]) for i in range(n)])


def test_epoch_sample_follows_the_weights_and_the_seed():
    mixed = MixedCorpus(parts=[corpus(10), corpus(4)], weights=[0.5, 2.5])
    first = mixed.epoch_sample(seed=1, epoch=0)
    counts = np.bincount(first, minlength=14)
    assert (counts[:10] <= 1).all() and counts[:10].sum() == 5  # half of the first corpus, none twice
    assert (counts[10:] >= 2).all() and counts[10:].sum() == 10  # each of the second twice, two of them thrice
    assert np.array_equal(first, mixed.epoch_sample(seed=1, epoch=0))  # what a resumed run draws again
    assert not np.array_equal(first, mixed.epoch_sample(seed=1, epoch=1))
    batches = epoch_batches(mixed, max_tokens=8, seed=1, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == sorted(first.tolist())
    assert mixed[12] == corpus(4)[2]


@pytest.fixture(scope="module")
def tagged_tokenizer():
    sentences = [f">>de<< {english(n)}" for n in range(200)] + [german(n) for n in range(200)]
    return Tokenizer.train(sentences, vocab_size=200, user_defined_symbols=(">>de<<", ">>up<<"))


def test_a_tag_is_one_piece(tagged_tokenizer):
    assert tagged_tokenizer.pieces(">>up<< twenty one")[:2] == ["▁", ">>up<<"]  # the word boundary, then the tag
    assert ">>de<<" in tagged_tokenizer.pieces(">>de<<twenty")


def test_an_unknown_tag_is_a_warning(tagged_tokenizer):
    text = ">>xx<< twenty one"
    tokens = tagged_tokenizer.pieces(text) + ["</s>"]
    found = input_warnings(tagged_tokenizer, tokens, text, stopped=False, cut=False, max_positions=256)
    assert {"code": "unknown_tag", "tags": [">>xx<<"]} in found
    line = in_words(next(w for w in found if w["code"] == "unknown_tag"))
    print(line)
    assert line.startswith(">>xx<<: not a tag of this model")
    known = input_warnings(tagged_tokenizer, tagged_tokenizer.pieces(">>de<< one"), ">>de<< one", stopped=False,
                           cut=False, max_positions=256)
    assert all(w["code"] != "unknown_tag" for w in known)


@pytest.mark.slow
def test_the_tag_steers_the_output_language(tmp_path):
    """English number words -> German (>>de<<) or upper-case German (>>up<<), one corpus each; held-out
    numbers come out in the language their tag asks for."""
    from aiayn.decoding.translator import Translator
    from aiayn.training.run import prepare_run

    rng = random.Random(0)
    numbers = rng.sample(range(1, 1000), 700)
    train, held = numbers[:600], numbers[600:]
    de = write(tmp_path / "de.tsv", [f"{english(n)}\t{german(n)}" for n in train[:300]])
    en = write(tmp_path / "up.en", [english(n) for n in train[300:]])
    up = write(tmp_path / "up.de", [german(n).upper() for n in train[300:]])
    valid = write(tmp_path / "valid.tsv", [f">>de<< {english(n)}\t{german(n)}" for n in held[:10]])
    cfg = load_config(None, [
        "data.dataset=files", f"data.valid={valid}", "data.vocab_size=120", "data.byte_fallback=false",
        f"data.corpora=[{{tsv: {de}, tag: '>>de<<'}}, {{src: {en}, tgt: {up}, weight: 1.0, tag: '>>up<<'}}]",
        "model.d_model=64", "model.d_ff=128", "model.n_heads=4", "model.n_encoder_layers=2", "model.n_decoder_layers=2",
        "model.dropout=0.0",
        "train.max_tokens=1500", "train.max_steps=400", "train.warmup_steps=40", "train.eval_every=1000",
        "train.save_every=400", "train.log_every=100", "train.num_threads=1", "train.average_last=1",
        "train.lr_factor=2.0"])
    prepare_run(cfg, tmp_path / "run").train()
    translator = Translator.from_pretrained(tmp_path / "run" / "checkpoints" / "step_00000400")
    test = held[10:]
    de_out = [r.text for r in translator.translate([f">>de<< {english(n)}" for n in test], beam=1)]
    up_out = [r.text for r in translator.translate([f">>up<< {english(n)}" for n in test], beam=1)]
    steered = sum(a.islower() and b.isupper() for a, b in zip(de_out, up_out)) / len(test)
    exact = sum(a == german(n) and b == german(n).upper() for n, a, b in zip(test, de_out, up_out)) / len(test)
    print(f"tag steering: {steered:.0%} of {len(test)} held-out numbers in the tagged language for both tags "
          f"({exact:.0%} exactly right); e.g. {de_out[0]!r} / {up_out[0]!r}")
    assert steered >= 0.8

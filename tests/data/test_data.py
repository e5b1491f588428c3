import gzip
import http.server
import json
import logging
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from aiayn.data import corpus, multi30k
from aiayn.data.batching import Example, collate, make_batches
from aiayn.data.corpus import CorpusError, read_lines, read_parallel
from aiayn.data.encoded import EncodedCorpus
from aiayn.data.synthetic import english, german, number_task
from tests.data_helpers import find_multi30k

SHARED = find_multi30k()
needs_multi30k = pytest.mark.skipif(SHARED is None, reason="no local Multi30k copy (set AIAYN_MULTI30K_DIR)")


def write(path, text: bytes):
    path.write_bytes(text)
    return path


def test_different_line_counts_name_both_files(tmp_path):
    a, b = write(tmp_path / "a.en", b"one\ntwo\nthree\n"), write(tmp_path / "b.de", b"eins\nzwei\n")
    with pytest.raises(CorpusError, match=r"a.en has 3 lines but .*b.de has 2.*line 3"):
        read_parallel(a, b)


def test_empty_missing_and_non_utf8_files(tmp_path):
    good = write(tmp_path / "good.txt", b"x\n")
    with pytest.raises(CorpusError, match="empty"):
        read_parallel(write(tmp_path / "empty.txt", b""), good)
    with pytest.raises(CorpusError, match="not found"):
        read_parallel(tmp_path / "nope.txt", good)
    bad = write(tmp_path / "bad.txt", b"fine\nbro\xffken\n")
    with pytest.raises(CorpusError, match=r"bad.txt:2: bytes that are not UTF-8"):
        read_parallel(bad, write(tmp_path / "two.txt", b"a\nb\n"))


def test_blank_lines_dropped_and_counted_gzip_read(tmp_path, caplog):
    src = tmp_path / "s.gz"
    src.write_bytes(gzip.compress(b"a\n\nc\n"))
    tgt = write(tmp_path / "t.txt", b"A\nB\n\n")
    with caplog.at_level(logging.WARNING):
        pairs = read_parallel(src, tgt)
    assert pairs == [("a", "A")]
    assert "dropped 2 blank line pair(s) of 3" in caplog.text


@needs_multi30k
def test_multi30k_local_directory():
    src, tgt = multi30k.pair_paths("val", "de", "en", SHARED)
    pairs = read_parallel(src, tgt)
    assert len(pairs) == 1014
    with pytest.raises(multi30k.DatasetError, match="unknown Multi30k split"):
        multi30k.split_path("dev", "de", SHARED)
    with pytest.raises(multi30k.DatasetError, match="no test_2017_flickr.de.gz there"):
        multi30k.split_path("test_2017_flickr", "de", SHARED)


@pytest.fixture
def loopback_server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@needs_multi30k
def test_download_verifies_sha256(loopback_server, tmp_path, monkeypatch):
    root, url = loopback_server
    monkeypatch.delenv("AIAYN_MULTI30K_DIR", raising=False)
    for name in ("val.de.gz", "val.en.gz"):
        (root / name).write_bytes((SHARED / name).read_bytes())
    cache = tmp_path / "cache"
    src, tgt = multi30k.pair_paths("val", "de", "en", cache_dir=cache, base_url=url)
    assert src == cache / "val.de.gz" and len(read_parallel(src, tgt)) == 1014
    assert not list(cache.glob(".*"))  # no temporary file left
    (root / "test_2016_flickr.de.gz").write_bytes(b"corrupt")
    with pytest.raises(multi30k.DatasetError, match="does not match the expected"):
        multi30k.split_path("test_2016_flickr", "de", cache_dir=cache, base_url=url)
    assert not (cache / "test_2016_flickr.de.gz").exists()
    with pytest.raises(multi30k.DatasetError, match="could not download.*--data-dir"):
        multi30k.split_path("train", "fr", cache_dir=cache, base_url=url)
    assert sorted(p.name for p in cache.iterdir()) == ["val.de.gz", "val.en.gz"]  # failed downloads leave nothing


def test_synthetic_task_is_deterministic_disjoint_and_reorders():
    generate = number_task.__wrapped__  # bypass the cache: two real generations must agree
    a, b = generate(500, 50, 50, seed=7), generate(500, 50, 50, seed=7)
    assert a == b and a != generate(500, 50, 50, seed=8)
    held = {s for s, _ in a["valid"] + a["test"]}
    assert not held & {s for s, _ in a["train"]}
    assert english(21) == "twenty one" and german(21) == "ein und zwanzig"  # units before tens
    assert german(345_021) == "drei hundert fünf und vierzig tausend ein und zwanzig"
    assert english(345_021) == "three hundred forty five thousand twenty one"


def test_tokenizer_ids_come_from_the_model(tokenizer):
    assert len({tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id}) == 4
    ids = tokenizer.encode(["forty five"])[0]
    assert tokenizer.decode(ids) == "forty five"


def test_token_budget_batching():
    examples = [Example([1] * (i % 17 + 1), [1] * (i % 13 + 1)) for i in range(300)]
    corpus = EncodedCorpus.from_examples(examples)
    batches = make_batches(corpus, max_tokens=64, seed=3, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(300))
    for b in batches:
        longest = max(max(len(examples[i].src), len(examples[i].tgt)) + 1 for i in b)
        assert longest * len(b) <= 64
    as_lists = [b.tolist() for b in batches]
    assert as_lists == [b.tolist() for b in make_batches(corpus, 64, 3, 0)]
    assert as_lists != [b.tolist() for b in make_batches(corpus, 64, 3, 1)]
    batch = collate([examples[0], examples[5]], pad_id=0, bos_id=2, eos_id=3)
    assert batch.tgt_in[0, 0] == 2 and batch.tgt_out[0, 1] == 3 and batch.n_tokens == 2 + 7


def test_read_lines_keeps_line_endings_semantics(tmp_path):
    f = write(tmp_path / "f.txt", b"a\r\n\nc")  # CRLF, a blank line, no final newline
    assert read_lines(f) == ["a", "", "c"]
    assert read_lines(write(tmp_path / "g.txt", b"\n")) == [""]


def test_directory_and_damaged_gzip_are_named(tmp_path):
    with pytest.raises(CorpusError, match=r"is a directory"):
        read_lines(tmp_path)
    data = gzip.compress(b"".join(b"sentence %d\n" % i for i in range(5000)))
    cases = {"truncated.gz": data[: len(data) // 2], "notgzip.gz": b"plain text\n",
             "corrupt.gz": data[:12] + bytes(b ^ 0x5A for b in data[12:40]) + data[40:]}
    for name, blob in cases.items():
        with pytest.raises(CorpusError, match=rf"{name}:\d+: damaged gzip file"):
            read_lines(write(tmp_path / name, blob))


def test_line_and_size_limits(tmp_path, monkeypatch):
    """A file without newlines (a binary, /dev/zero, a gzip bomb of zeros) stops at the first line."""
    bomb = write(tmp_path / "bomb.gz", gzip.compress(b"\0" * 20_000_000))
    with pytest.raises(CorpusError, match=r"bomb.gz:1: line longer than 100,000 characters"):
        read_lines(bomb)
    if Path("/dev/zero").exists():
        with pytest.raises(CorpusError, match=r"/dev/zero:1: line longer"):
            read_lines("/dev/zero")
    long_line = "ä" * (corpus.MAX_LINE_CHARS + 1)  # 2 bytes a character: the limit counts characters
    with pytest.raises(CorpusError, match=r"long.txt:2: line longer"):
        read_lines(write(tmp_path / "long.txt", f"ok\n{long_line}\n".encode()))
    assert len(read_lines(write(tmp_path / "max.txt", ("ä" * corpus.MAX_LINE_CHARS).encode()))[0]) == 100_000
    monkeypatch.setattr(corpus, "MAX_LINES", 10)
    many = write(tmp_path / "many.gz", gzip.compress(b"x\n" * 100_000))
    with pytest.raises(CorpusError, match=r"many.gz:11: more than 10 lines"):
        read_lines(many)
    monkeypatch.setattr(corpus, "MAX_LINES", 10**6)
    monkeypatch.setattr(corpus, "MAX_BYTES", 1000)
    with pytest.raises(CorpusError, match=r"many.gz:501: more than 9.3\d*e-07 GiB"):
        read_lines(many)


def test_files_dataset_without_valid_files_and_multi30k_errors_are_user_errors(tmp_path):
    from aiayn.config import ConfigError, DataConfig
    from aiayn.data.datasets import load_pairs
    from aiayn.errors import AiaynError

    data = DataConfig(dataset="files", train_src="a", train_tgt="b")
    with pytest.raises(ConfigError, match="data.valid_src and data.valid_tgt"):
        load_pairs(data, "valid")
    assert issubclass(multi30k.DatasetError, AiaynError)


def test_encoded_corpus_round_trip_and_cache(tmp_path, tokenizer, monkeypatch):
    """Streamed in chunks, written as flat arrays, memory-mapped back: the same examples as encoding in
    memory, pairs over max_len dropped; a second call with the same inputs reuses the cache."""
    import aiayn.data.encoded as encoded
    from aiayn.data.datasets import to_examples
    from aiayn.data.synthetic import number_task

    monkeypatch.setattr(encoded, "CHUNK_PAIRS", 7)
    pairs = number_task(50, 5, 5, seed=2)["train"]
    corpus = encoded.encoded_corpus(lambda: iter(pairs), tokenizer, 3, "abc", tmp_path / "cache")
    expected = to_examples(pairs, tokenizer, 3, "test")
    assert 0 < len(corpus) == len(expected) < len(pairs)
    assert [corpus[i] for i in range(len(corpus))] == expected
    assert isinstance(corpus.src_ids, np.memmap) and corpus.src_ids.dtype == np.uint16
    (entry,) = (tmp_path / "cache").iterdir()
    assert json.loads((entry / "meta.json").read_text())["dropped_longer_than_max_len"] == len(pairs) - len(expected)
    again = encoded.encoded_corpus(lambda: iter(()), tokenizer, 3, "abc", tmp_path / "cache")  # not re-read
    assert len(again) == len(corpus)
    other = encoded.encoded_corpus(lambda: iter(pairs), tokenizer, 4, "abc", tmp_path / "cache")
    assert len(other) > len(corpus) and len(list((tmp_path / "cache").iterdir())) == 2


def test_streamed_parallel_files_keep_the_errors(tmp_path):
    from aiayn.data.corpus import iter_parallel

    src, tgt = tmp_path / "a.txt", tmp_path / "b.txt"
    src.write_text("one\ntwo\nthree\n")
    tgt.write_text("eins\nzwei\n")
    with pytest.raises(CorpusError, match=r"has 3 lines but .* has 2; .*\(line 3 is the first"):
        list(iter_parallel(src, tgt))
    with pytest.raises(CorpusError, match=r"has 2 lines but .* has 3; .*\(line 3 is the first"):
        list(iter_parallel(tgt, src))


def test_unchanged_files_skip_the_pairs_pass_on_resume(tmp_path, monkeypatch):
    """run.json keeps the raw files' hash: a resume on the same bytes reuses data_sha256 instead of reading
    every pair again (a minute for 4.5M pairs); changed bytes are read pair by pair as before."""
    import aiayn.training.run as run
    from aiayn.config import load_config

    for name, text in (("train.en", "one\ntwo\nthree\n" * 20), ("train.de", "eins\nzwei\ndrei\n" * 20),
                       ("valid.en", "two\n"), ("valid.de", "zwei\n")):
        (tmp_path / name).write_text(text)
    cfg = load_config(None, ["data.dataset=files", f"data.train_src={tmp_path}/train.en",
                             f"data.train_tgt={tmp_path}/train.de", f"data.valid_src={tmp_path}/valid.en",
                             f"data.valid_tgt={tmp_path}/valid.de", "data.vocab_size=30", "data.byte_fallback=false",
                             "train.max_steps=2"])
    first = run.prepare_run(cfg, tmp_path / "run")
    first.run_lock.close()
    marker = json.loads((tmp_path / "run" / "run.json").read_text())
    assert marker["files_sha256"] and marker["data_sha256"]

    def not_again(*args):
        raise AssertionError("the pairs were read again")

    monkeypatch.setattr(run, "data_fingerprint", not_again)
    run.prepare_run(cfg, tmp_path / "run").run_lock.close()
    (tmp_path / "train.de").write_text("eins\nzwei\ndrei\n" * 20 + "\n")  # other bytes, the same pairs
    with pytest.raises(AssertionError, match="read again"):
        run.prepare_run(cfg, tmp_path / "run")

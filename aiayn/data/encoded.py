"""Encoded corpora: a parallel corpus's token ids in flat arrays plus offsets, as fairseq's and Megatron's
indexed datasets keep them, written once and memory-mapped by training.

Why: holding a corpus as Python lists of lists costs ~1.4 GB per million pairs, in every torchrun process.
Flat arrays cost 2 bytes a token (4 when the vocabulary passes 65,536) on disk, and a mapped file costs
memory only for the pages a process reads: its own batches. Hand-written rather than Arrow (`datasets`):
two arrays and two offset tables per corpus need numpy alone, and the batcher needs only the lengths.

A directory written by write_encoded:
  meta.json                 format version, dtype, sentence and token counts, what it was made from
  src.bin, tgt.bin          token ids of all sentences, end to end (no bos/eos), dtype uint16 or int32
  src_offsets.npy, tgt_offsets.npy   int64 (n + 1,): sentence i is ids[offsets[i]:offsets[i + 1]]
"""

import hashlib
import itertools
import json
import logging
import re
import shutil
import time
from pathlib import Path

import numpy as np

from aiayn.data.batching import Example
from aiayn.data.file_hash import sha256_of

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: meta.json holds every file's sha256
CHUNK_PAIRS = 50_000  # pairs encoded per call: keeps the Python lists of one chunk small
KEY_CHARS = 20  # a cache entry's name: that many hex digits of its key
# aiayn.io.atomic_dir's names for an entry being written (.tmp) or replaced (.old): ".<key>.<8 random>.tmp"
TEMPORARY = re.compile(rf"\.[0-9a-f]{{{KEY_CHARS}}}\.[a-z0-9_]{{8}}\.(?:tmp|old)")


class EncodedCorpus:
    """Pairs of token-id sequences. corpus[i] -> Example (lists of ints); src_lengths / tgt_lengths are
    numpy arrays (the batcher needs only these)."""

    def __init__(self, *, src_ids: np.ndarray, src_offsets: np.ndarray, tgt_ids: np.ndarray,
                 tgt_offsets: np.ndarray):
        self.src_ids, self.src_offsets = src_ids, src_offsets
        self.tgt_ids, self.tgt_offsets = tgt_ids, tgt_offsets
        self.src_lengths = np.diff(src_offsets)  # (n,)
        self.tgt_lengths = np.diff(tgt_offsets)

    def __len__(self) -> int:
        return len(self.src_lengths)

    def __getitem__(self, i: int) -> Example:
        s, t = self.src_offsets, self.tgt_offsets
        return Example(self.src_ids[s[i]:s[i + 1]].tolist(), self.tgt_ids[t[i]:t[i + 1]].tolist())

    @classmethod
    def from_examples(cls, examples: list[Example]) -> "EncodedCorpus":
        """In memory (validation sets, the synthetic task, tests)."""
        src, src_offsets = _flatten([e.src for e in examples])
        tgt, tgt_offsets = _flatten([e.tgt for e in examples])
        return cls(src_ids=src, src_offsets=src_offsets, tgt_ids=tgt, tgt_offsets=tgt_offsets)

    @classmethod
    def open(cls, path: Path) -> "EncodedCorpus":
        """Memory-map a directory written by write_encoded."""
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        arrays = {}
        for side in ("src", "tgt"):
            offsets = np.load(path / f"{side}_offsets.npy", mmap_mode="r")
            count = int(offsets[-1])
            arrays[f"{side}_offsets"] = offsets
            arrays[f"{side}_ids"] = np.memmap(path / f"{side}.bin", dtype=meta["dtype"], mode="r", shape=(count,)) \
                if count else np.zeros(0, dtype=meta["dtype"])
        return cls(**arrays)


def _flatten(sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64, count=int(offsets[-1]))
    return ids, offsets


def id_dtype(vocab_size: int) -> str:
    return "uint16" if vocab_size <= 65536 else "int32"


def write_encoded(pairs, tokenizer, max_len: int | None, tmp: Path, source: dict) -> dict:
    """Encode an iterable of (source, target) sentences into `tmp` (a fresh directory, renamed into place by
    the caller), CHUNK_PAIRS at a time; pairs longer than max_len subwords are dropped and counted.
    Returns the meta.json it wrote."""
    dtype = id_dtype(max(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size))
    lengths = {"src": [np.zeros(1, dtype=np.int64)], "tgt": [np.zeros(1, dtype=np.int64)]}
    kept = dropped = 0
    with open(tmp / "src.bin", "wb") as src_file, open(tmp / "tgt.bin", "wb") as tgt_file:
        files = {"src": src_file, "tgt": tgt_file}
        for chunk in _chunks(pairs, CHUNK_PAIRS):
            encoded = {"src": tokenizer.encode_source([s for s, _ in chunk]),
                       "tgt": tokenizer.encode_target([t for _, t in chunk])}
            keep = [max_len is None or (len(s) <= max_len and len(t) <= max_len)
                    for s, t in zip(encoded["src"], encoded["tgt"])]
            kept, dropped = kept + sum(keep), dropped + keep.count(False)
            for side, sequences in encoded.items():
                sequences = list(itertools.compress(sequences, keep))
                ids, offsets = _flatten(sequences)
                files[side].write(ids.astype(dtype).tobytes())
                lengths[side].append(np.diff(offsets))
    for side, parts in lengths.items():
        np.save(tmp / f"{side}_offsets.npy", np.cumsum(np.concatenate(parts)))
    meta = {"format": FORMAT_VERSION, "dtype": dtype, "pairs": kept, "dropped_longer_than_max_len": dropped,
            "max_len": max_len, **source}
    meta["sha256"] = {f.name: sha256_of(f) for f in sorted(tmp.iterdir())}  # checked by intact()
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return meta


def intact(path: Path) -> bool:
    """Whether a cache directory holds what write_encoded wrote there, byte for byte (a damaged cache would
    train on wrong ids without a word). Hashing costs about a second per GB."""
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        hashes = meta["sha256"]
        names = {f.name for f in path.iterdir()} - {"meta.json"}
        return meta.get("format") == FORMAT_VERSION and set(hashes) == names and \
            all(sha256_of(path / name) == digest for name, digest in hashes.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def remove_temporaries(cache: Path) -> None:
    """Entries half-written by a process that was killed (a corpus-sized `.<key>.<random>.tmp`): only aiayn's
    names, and only for a caller that holds the lock of the directory (a run's .lock), so that no live process
    is writing them."""
    if not cache.is_dir() or cache.is_symlink():
        return
    for path in cache.iterdir():
        if TEMPORARY.fullmatch(path.name):
            log.info("removing %s, left by a stopped run", path)
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() and not path.is_symlink() else path.unlink()


def encoded_corpus(pairs_factory, tokenizer, max_len: int | None, fingerprint: str, cache: Path,
                   is_main: bool = True, barrier=lambda: None, *, locked: bool = False) -> EncodedCorpus:
    """The memory-mapped encoding of a corpus, from `cache/<key>` (key: the data's fingerprint, the
    tokenizer, max_len, this format), written there first when missing (by the main process only; the others
    wait at `barrier`). pairs_factory() yields the corpus's (source, target) sentences. locked: the caller
    holds the lock of the cache's directory, so temporaries found there are stale and removed."""
    key = hashlib.sha256(f"{FORMAT_VERSION}|{fingerprint}|{hashlib.sha256(tokenizer.proto).hexdigest()}|"
                         f"{max_len}".encode()).hexdigest()[:KEY_CHARS]
    path = Path(cache) / key
    if Path(cache).exists() and not Path(cache).is_dir():
        from aiayn.errors import OutputError

        raise OutputError(f"{cache} is a file where aiayn keeps its encoded corpus: move it away (the run "
                          f"encodes its corpus there again)")
    if is_main and locked:
        remove_temporaries(Path(cache))
    if is_main and not intact(path):
        from aiayn.io import atomic_dir

        if path.exists() or path.is_symlink():  # aiayn's own cache: rebuilt, never trusted when damaged
            log.warning("%s: the encoded corpus is damaged or incomplete; encoding it again", path)
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()

        start = time.perf_counter()
        with atomic_dir(path) as tmp:
            meta = write_encoded(pairs_factory(), tokenizer, max_len, tmp, {"data_sha256": fingerprint})
        log.info("encoded %d training pairs into %s in %.1f s", meta["pairs"], path, time.perf_counter() - start)
        if meta["dropped_longer_than_max_len"]:
            log.warning("training data: dropped %d of %d pairs longer than data.max_len=%d subwords",
                        meta["dropped_longer_than_max_len"], meta["pairs"] + meta["dropped_longer_than_max_len"],
                        max_len)
    barrier()
    return EncodedCorpus.open(path)


def _chunks(iterable, size: int):
    iterator = iter(iterable)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk

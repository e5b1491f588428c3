"""Several training corpora, each with a weight and an optional tag (data.corpora), and TSV files.

    data:
      dataset: files
      corpora:
        - {src: news.en, tgt: news.de, weight: 1.0}
        - {tsv: backtranslated.tsv, weight: 0.5, tag: "<BT>"}
      valid: dev.tsv

Sampling, per epoch: corpus k of n_k pairs (those within data.max_len) contributes round(weight_k * n_k)
pairs: each of its pairs floor(weight_k) times, plus a random subset (without repetition) of the rest,
drawn afresh each epoch from (train.seed, epoch, k). Weight 1 is every pair once; 0.5 a different half
each epoch; 3 each pair three times. The sample depends on nothing but the seed and the epoch, so a
resumed run draws the same one (resume stays exact). The epoch's pairs are then batched as one corpus.

A tag (e.g. ">>de<<", "<BT>") is put before every source sentence of its corpus, separated by a space, and
is a user-defined symbol of the SentencePiece model, so it is always one piece: tagged back-translation,
or the target-language token of a multilingual model (the user then writes the tag before a sentence to
translate; see translation_tags for what happens with a tag the model does not have).
"""

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aiayn.data.batching import make_batches
from aiayn.data.corpus import iter_parallel, iter_tsv
from aiayn.data.encoded import EncodedCorpus, encoded_corpus
from aiayn.data.memory_budget import check_epoch
from aiayn.data.spm_training import reserved_piece, reserved_reason
from aiayn.errors import ConfigError

TAG_LIKE = re.compile(r">>[^\s<>]+<<")  # the multilingual-tag convention (Marian, OPUS-MT): >>de<<


@dataclass(frozen=True, kw_only=True)
class CorpusSpec:
    """One entry of data.corpora: aligned files (src, tgt) or one TSV file, its weight and tag."""

    name: str  # data.corpora[i], for messages
    src: str = ""
    tgt: str = ""
    tsv: str = ""
    weight: float = 1.0
    tag: str = ""

    def files(self) -> list[Path]:
        return [Path(self.tsv)] if self.tsv else [Path(self.src), Path(self.tgt)]

    def pairs(self):
        """The corpus's (source, target) sentences, the tag before each source."""
        pairs = iter_tsv(self.tsv) if self.tsv else iter_parallel(self.src, self.tgt)
        return ((f"{self.tag} {s}", t) for s, t in pairs) if self.tag else pairs


def _spec(entry, index: int) -> CorpusSpec:
    name = f"data.corpora[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{name}: expected a mapping such as {{src: a.en, tgt: a.de, weight: 1}} or "
                          f"{{tsv: a.tsv}}, got {entry!r}")
    unknown = sorted(set(entry) - {"src", "tgt", "tsv", "weight", "tag"})
    if unknown:
        raise ConfigError(f"{name}: unknown key(s) {unknown}; a corpus has src and tgt (or tsv), weight and tag")
    files = {k: entry.get(k) for k in ("src", "tgt", "tsv") if entry.get(k) is not None}
    if not all(isinstance(v, str) and v for v in files.values()) or set(files) not in ({"src", "tgt"}, {"tsv"}):
        raise ConfigError(f"{name}: give either src and tgt (aligned files) or tsv (source<TAB>target lines), "
                          f"not {sorted(files) or 'neither'}")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < 1e6:
        raise ConfigError(f"{name}.weight={weight!r}: must be a number > 0 (its pairs per epoch, as a multiple of "
                          f"its size); leave the corpus out instead of giving it weight 0")
    tag = entry.get("tag") or ""
    if not isinstance(tag, str) or re.search(r"\s", tag):
        raise ConfigError(f"{name}.tag={tag!r}: must be one word without spaces, such as '>>de<<' or '<BT>'")
    if reserved_piece(tag):
        raise ConfigError(f"{name}.tag={tag!r}: {reserved_reason(reserved_piece(tag))} is a piece the tokenizer "
                          f"reserves, so it cannot be a tag; choose another, such as '>>de<<' or '<BT>'")
    return CorpusSpec(name=name, weight=float(weight), tag=tag, **files)


def corpus_specs(data) -> list[CorpusSpec]:
    """data.corpora, checked (ConfigError naming the entry)."""
    return [_spec(entry, i) for i, entry in enumerate(data.corpora)]


def check_data_files(data) -> None:
    """data.dataset=files: the training side is data.corpora, or data.train (TSV), or data.train_src and
    data.train_tgt, exactly one of them; the validation side data.valid or data.valid_src and valid_tgt.
    Corpora's files must exist (the other files are checked when they are read)."""
    if data.corpora and data.dataset != "files":
        raise ConfigError(f"data.corpora needs data.dataset=files (it is {data.dataset})")
    if data.dataset != "files":
        return
    for split in ("train", "valid"):
        given = [f"data.{k}" for k in (f"{split}_src", f"{split}_tgt", split) if getattr(data, k)]
        if split == "train" and data.corpora:
            if given:
                raise ConfigError(f"data.corpora and {', '.join(given)} are both set: data.corpora lists every "
                                  f"training corpus; move those files into it or drop data.corpora")
            continue
        if getattr(data, split) and len(given) > 1:
            raise ConfigError(f"data.{split} (a TSV file) and {', '.join(given[:-1])} are both set; give one")
        if not getattr(data, split) and len(given) < 2:
            missing = [f"data.{k}" for k in (f"{split}_src", f"{split}_tgt") if not getattr(data, k)]
            raise ConfigError(f"data.dataset=files needs data.{split} (a TSV file, source<TAB>target) or data."
                              f"{split}_src and data.{split}_tgt" + (" or data.corpora" if split == "train" else "")
                              + f" (missing: {', '.join(missing)})")
    for spec in corpus_specs(data):
        for key, path in (("tsv", spec.tsv), ("src", spec.src), ("tgt", spec.tgt)):
            if path and not Path(path).is_file():
                raise ConfigError(f"{spec.name}.{key}: {path}: file not found (or not a file); check the path")


def corpus_tags(data) -> list[str]:
    """The corpora's tags, each once, in order: the tokenizer's user-defined symbols."""
    return list(dict.fromkeys(spec.tag for spec in corpus_specs(data) if spec.tag))


def train_pairs(data):
    """Every corpus's pairs, one after the other, tagged (the tokenizer and the data fingerprint read these)."""
    return itertools.chain.from_iterable(spec.pairs() for spec in corpus_specs(data))


def data_files(data) -> list[Path]:
    """The files a data.dataset=files config reads, training then validation."""
    if data.corpora:
        train = [path for spec in corpus_specs(data) for path in spec.files()]
    else:
        train = [Path(data.train)] if data.train else [Path(data.train_src), Path(data.train_tgt)]
    valid = [Path(data.valid)] if data.valid else [Path(data.valid_src), Path(data.valid_tgt)]
    return train + valid


class MixedCorpus:
    """Several encoded corpora as one (indices run through them in order), with their weights: what the
    trainer batches; epoch_sample says which pairs an epoch has."""

    def __init__(self, *, parts: list[EncodedCorpus], weights: list[float]):
        self.parts, self.weights = parts, weights
        self.starts = np.cumsum([0] + [len(p) for p in parts])  # (K + 1,)
        self.src_lengths = np.concatenate([np.asarray(p.src_lengths) for p in parts])
        self.tgt_lengths = np.concatenate([np.asarray(p.tgt_lengths) for p in parts])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, i: int):
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.parts[k][int(i - self.starts[k])]

    def epoch_sample(self, seed: int, epoch: int) -> np.ndarray:
        """Indices of this epoch's pairs (the rule in the module's docstring), repeats included."""
        chosen = []
        for k, (part, weight) in enumerate(zip(self.parts, self.weights)):
            n = len(part)
            count = int(round(weight * n))
            whole, rest = divmod(count, n) if n else (0, 0)
            rng = np.random.default_rng([seed, epoch, k])
            local = np.concatenate([np.tile(np.arange(n), whole), np.sort(rng.permutation(n)[:rest])])
            chosen.append(self.starts[k] + local.astype(np.int64))
        return np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)


@dataclass
class _Lengths:
    src_lengths: np.ndarray
    tgt_lengths: np.ndarray


def epoch_batches(corpus, max_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
    """make_batches over an epoch's pairs: a MixedCorpus's epoch_sample, any other corpus whole; the
    batches hold indices of `corpus`."""
    if not isinstance(corpus, MixedCorpus):
        return make_batches(corpus, max_tokens, seed, epoch)
    sample = corpus.epoch_sample(seed, epoch)
    view = _Lengths(corpus.src_lengths[sample], corpus.tgt_lengths[sample])
    return [sample[b] for b in make_batches(view, max_tokens, seed, epoch)]


def encoded_mixture(data, tokenizer, fingerprint: str, cache: Path, is_main: bool, barrier) -> MixedCorpus:
    """Each corpus of data.corpora encoded on its own (aiayn.data.encoded; pairs longer than data.max_len
    dropped), so that its size, and so its share of an epoch, counts the pairs training has. The weights are
    checked against those sizes (aiayn.data.memory_budget) before an epoch is drawn."""
    parts = [encoded_corpus(spec.pairs, tokenizer, data.max_len, f"{fingerprint}|corpus {k}", cache, is_main,
                            barrier, locked=True) for k, spec in enumerate(corpus_specs(data))]
    specs = corpus_specs(data)
    check_epoch([spec.name for spec in specs], [len(p) for p in parts], [spec.weight for spec in specs])
    return MixedCorpus(parts=parts, weights=[spec.weight for spec in specs])


def unknown_tags(text: str, has_piece) -> list[str]:
    """Tag-like words (>>xx<<) of a sentence to translate that are not one piece of the model's vocabulary
    (has_piece(piece) -> bool): the model never saw them, so they steer nothing."""
    return [tag for tag in dict.fromkeys(TAG_LIKE.findall(text)) if not has_piece(tag)]

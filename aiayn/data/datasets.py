"""From a DataConfig to sentence pairs and subword examples (the one place data config meets files)."""

import logging

from aiayn.data import multi30k
from aiayn.data.batching import Example
from aiayn.data.coreference import coreference_task
from aiayn.data.corpora import train_pairs
from aiayn.data.corpus import iter_parallel, iter_tsv
from aiayn.data.synthetic import number_task
from aiayn.data.tokenizer import Tokenizer
from aiayn.errors import ConfigError

log = logging.getLogger(__name__)


def load_pairs(data, split: str) -> list[tuple[str, str]]:
    """split: "train" or "valid" (or, for multi30k, any split name such as "test_2016_flickr")."""
    return list(iter_pairs(data, split))


def iter_pairs(data, split: str):
    """load_pairs' pairs one at a time: corpus files are streamed, never held whole."""
    if data.dataset == "synthetic":
        task = number_task(data.synthetic_train, data.synthetic_valid, data.synthetic_valid, data.synthetic_seed)
        return iter(task["valid" if split == "val" else split])
    if data.dataset == "coreference":
        task = coreference_task(data.synthetic_train, data.synthetic_valid, data.synthetic_valid, data.synthetic_seed,
                                data.coreference_order)
        return iter(task["valid" if split == "val" else split])
    if data.dataset == "multi30k":
        name = data.valid_split if split == "valid" else split
        return iter_parallel(*multi30k.pair_paths(name, data.src_lang, data.tgt_lang, data.data_dir or None))
    if split == "train" and data.corpora:
        return train_pairs(data)
    tsv = data.train if split == "train" else data.valid  # one TSV file in place of two aligned ones
    if tsv:
        return iter_tsv(tsv)
    src, tgt = (data.train_src, data.train_tgt) if split == "train" else (data.valid_src, data.valid_tgt)
    if not (src and tgt):  # load_config checks this too; a config built in code may not have been
        raise ConfigError(f"data.dataset=files has no {split} files configured: set data.{split} (TSV) or "
                          f"data.{split}_src and data.{split}_tgt")
    return iter_parallel(src, tgt)


def to_examples(pairs, tokenizer: Tokenizer, max_len: int | None, what: str) -> list[Example]:
    """Tokenize; pairs longer than max_len subwords are dropped and counted."""
    srcs = tokenizer.encode_source([s for s, _ in pairs])
    tgts = tokenizer.encode_target([t for _, t in pairs])
    examples = [Example(s, t) for s, t in zip(srcs, tgts)]
    if max_len:
        kept = [e for e in examples if len(e.src) <= max_len and len(e.tgt) <= max_len]
        if len(kept) < len(examples):
            log.warning("%s: dropped %d of %d pairs longer than data.max_len=%d subwords", what,
                        len(examples) - len(kept), len(examples), max_len)
        examples = kept
    return examples

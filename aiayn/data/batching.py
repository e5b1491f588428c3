"""Token-budget batching: sentences bucketed by length, batches capped by tokens, shuffled by seed.

Every process builds the same batch list from the same seed, so the data position of a run is just
(epoch, index of the next batch): enough to resume exactly and to split work between processes.
"""

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Example:
    src: list[int]  # subword ids, no bos/eos
    tgt: list[int]


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) with eos at the end of each source
    tgt_in: torch.Tensor  # (B, T) bos y_1 .. y_n
    tgt_out: torch.Tensor  # (B, T) y_1 .. y_n eos
    n_tokens: int  # real target tokens (the loss normalizer)


def make_batches(corpus, max_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
    """Example indices of `corpus` (anything with src_lengths and tgt_lengths arrays, e.g. an
    aiayn.data.encoded.EncodedCorpus) grouped into batches whose padded size (count x longest) stays within
    max_tokens. Sorting by length keeps padding low; ties in length are broken randomly, and the batch
    order is shuffled, by (seed, epoch)."""
    rng = np.random.default_rng(seed * 100003 + epoch)
    src, tgt = np.asarray(corpus.src_lengths), np.asarray(corpus.tgt_lengths)
    order = rng.permutation(len(src))
    order = order[np.lexsort((tgt[order], src[order]))]  # stable: the random order survives within ties
    sizes = (np.maximum(src, tgt)[order] + 1).tolist()  # + 1: </s> or <s>
    starts, count, longest = [0], 0, 0
    for position, size in enumerate(sizes):
        if count and max(longest, size) * (count + 1) > max_tokens:
            starts.append(position)
            count, longest = 0, 0
        count, longest = count + 1, max(longest, size)
    batches = np.split(order, starts[1:]) if len(order) else []
    rng.shuffle(batches)
    return batches


def collate(examples: list[Example], pad_id: int, bos_id: int, eos_id: int) -> Batch:
    src_len = max(len(e.src) for e in examples) + 1
    tgt_len = max(len(e.tgt) for e in examples) + 1
    src = torch.full((len(examples), src_len), pad_id, dtype=torch.long)
    tgt_in = torch.full((len(examples), tgt_len), pad_id, dtype=torch.long)
    tgt_out = torch.full((len(examples), tgt_len), pad_id, dtype=torch.long)
    for row, e in enumerate(examples):
        src[row, : len(e.src) + 1] = torch.tensor(e.src + [eos_id])
        tgt_in[row, : len(e.tgt) + 1] = torch.tensor([bos_id] + e.tgt)
        tgt_out[row, : len(e.tgt) + 1] = torch.tensor(e.tgt + [eos_id])
    return Batch(src, tgt_in, tgt_out, int((tgt_out != pad_id).sum()))

"""Token-budget batching: sentences bucketed by length, batches capped by tokens, shuffled by seed.

Every process builds the same batch list from the same seed, so the data position of a run is just
(epoch, index of the next batch): enough to resume exactly and to split work between processes.
"""

import random
from dataclasses import dataclass

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


def make_batches(examples: list[Example], max_tokens: int, seed: int, epoch: int) -> list[list[int]]:
    """Example indices grouped into batches whose padded size (count x longest) stays within max_tokens.
    Sorting by length keeps padding low; the batch order is shuffled by (seed, epoch)."""
    rng = random.Random(seed * 100003 + epoch)
    order = list(range(len(examples)))
    rng.shuffle(order)  # ties in length broken randomly, differently each epoch
    order.sort(key=lambda i: (len(examples[i].src), len(examples[i].tgt)))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(len(examples[i].src), len(examples[i].tgt)) + 1
        if current and max(longest, size) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
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

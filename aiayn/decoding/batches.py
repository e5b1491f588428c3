"""Sources as every search takes them: subword ids with </s>, padded into (B, S) tensors, in length-sorted
batches; and the one loop that runs a search batch by batch and puts the results back in input order."""

from collections.abc import Callable, Iterable

import torch


def max_positions(model) -> int | None:
    """How many positions the model's position table has (None: no limit, e.g. an RNN)."""
    return model.max_positions


def encode_sources(tokenizer, sentences: list[str]) -> list[list[int]]:
    """Subword ids with the final </s>; over-long sources are the caller's to cut or refuse."""
    return [s + [tokenizer.eos_id] for s in tokenizer.encode_source(sentences)]


def pad_batch(sequences: list[list[int]], pad_id: int, device) -> torch.Tensor:
    longest = max(len(s) for s in sequences)
    out = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out.to(device)


def length_sorted_batches(lengths: list[int], max_sentences: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indices in batches of similar length: at most max_sentences each and, with max_tokens, at most that
    many tokens padding included (batch size x its longest); a longer sentence still gets a batch alone."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for i in order:
        batch = batches[-1] if batches else None
        if batch is None or len(batch) >= max_sentences or (
                max_tokens is not None and (len(batch) + 1) * lengths[i] > max_tokens):
            batches.append([i])
        else:
            batch.append(i)
    return batches


def in_input_order(batches: list[list[int]], per_batch: Iterable[list], n: int) -> list:
    """Per batch its rows' results (as `batches` orders them) -> one result per sentence, in input order."""
    out: list = [None] * n
    for indices, rows in zip(batches, per_batch):
        for i, row in zip(indices, rows):
            out[i] = row
    return out


def search_in_batches(sources: list[list[int]], search_batch: Callable[[list[int]], list], batch_size: int,
                      max_tokens: int | None = None) -> list:
    """The decode loop: search_batch(indices of one batch) -> a result per row, run on length-sorted batches
    of `sources`, shortest first -> a result per sentence, in input order."""
    batches = length_sorted_batches([len(s) for s in sources], batch_size, max_tokens)
    return in_input_order(batches, (search_batch(indices) for indices in batches), len(sources))

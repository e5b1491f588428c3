"""Text in, text out, in length-sorted batches (shared by the dev-BLEU callback and the Translator)."""

import torch

from aiayn.decoding.greedy import greedy_decode


def position_table(model) -> torch.Tensor | None:
    """The model's positions (max_len, D): sinusoids or learned (None: no positions, e.g. an RNN)."""
    positional = getattr(model, "positional", None)
    return getattr(positional, "table", getattr(positional, "weight", None))


def max_positions(model) -> int | None:
    """How many positions the model's position table has (None: no limit, e.g. an RNN)."""
    table = position_table(model)
    return None if table is None else table.size(0)


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


@torch.no_grad()
def greedy_translate(model, tokenizer, sentences: list[str], decode_cfg, batch_size: int = 128) -> list[str]:
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    sources = encode_sources(tokenizer, sentences)
    outputs: list[str] = [""] * len(sentences)
    for indices in length_sorted_batches([len(s) for s in sources], batch_size):
        src = pad_batch([sources[i] for i in indices], tokenizer.pad_id, device)
        hyps, _ = greedy_decode(model, src, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id,
                                decode_cfg.max_len_a, decode_cfg.max_len_b, max_positions(model))
        for i, hyp in zip(indices, hyps):
            outputs[i] = tokenizer.decode(hyp)
    model.train(was_training)
    return outputs

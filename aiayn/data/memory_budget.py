"""Sizes checked against the memory this machine has free, before they are built: an epoch that data.corpora's
weights make too large, a batch or a model that cannot fit, is refused with one line naming the field and the
size it would take, instead of growing until the kernel kills the run.

Free memory: /proc/meminfo's MemAvailable (else sysconf's available pages), and no more than a cgroup's memory
limit less its usage (v2 memory.max, v1 memory.limit_in_bytes). A run plans on at most MARGIN of it.
"""

import os
from pathlib import Path

from aiayn.errors import ConfigError

# An epoch's peak cost per pair in epoch_batches (measured with tracemalloc on 3M pairs: 56 bytes): the int64
# sample, its length views, the batcher's permutation, sort and list of sizes, the batches' index arrays.
EPOCH_BYTES_PER_PAIR = 64
MARGIN = 0.8  # of the free memory a run may plan to use
# a search this small is not checked: less than the model it runs, and reading the free memory (/proc and the
# cgroup's files) took 76 us, a tenth of a one-sentence translation's Python
SMALL_SEARCH_BYTES = 32 * 2**20
CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None  # absent, or "max" (no limit)


def available_memory() -> int | None:
    """Bytes this process may still allocate, or None when the machine does not say."""
    free = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if free is None:
        try:
            free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (OSError, ValueError, AttributeError):
            pass
    for limit_file, usage_file in CGROUP_FILES:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and limit < 2**60:  # v1 writes a huge number for "no limit"
            left = max(0, limit - (usage or 0))
            free = left if free is None else min(free, left)
    return free


def human_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{int(n)} bytes"


def human_count(n: float) -> str:
    for unit, size in ((" billion", 1e9), (" million", 1e6)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{int(n):,}"


def budget() -> int | None:
    """The bytes a run may plan to use (MARGIN of available_memory()), or None when unknown."""
    free = available_memory()
    return None if free is None else int(free * MARGIN)


def check_fits(what: str, needed: float, advice: str) -> None:
    """ConfigError (one line: `what`, the size, the memory free, `advice`) when `needed` bytes exceed the budget."""
    allowed = budget()
    if allowed is not None and needed > allowed:
        raise ConfigError(f"{what} (about {human_bytes(needed)}), more than the {human_bytes(allowed / MARGIN)} "
                          f"this machine has free; {advice}")


def epoch_pair_counts(sizes: list[int], weights: list[float]) -> list[int]:
    """Pairs each corpus gives an epoch: round(weight * size) (aiayn.data.corpora's rule)."""
    return [int(round(w * n)) for n, w in zip(sizes, weights)]


def check_epoch(names: list[str], sizes: list[int], weights: list[float]) -> None:
    """data.corpora's weights against the corpora's sizes (pairs within data.max_len): every corpus gives an
    epoch at least one pair, and the epoch's index arrays fit in memory; else ConfigError naming the weight."""
    counts = epoch_pair_counts(sizes, weights)
    for name, n, w, count in zip(names, sizes, weights, counts):
        if n and not count:
            raise ConfigError(f"{name}.weight={w:g}: its {n:,} pairs give round({w:g} x {n:,}) = 0 pairs an epoch, "
                              f"so training would never see it; give a weight of at least {1 / n:.3g} or leave "
                              f"the corpus out")
    allowed = budget()
    total = sum(counts)
    if allowed is None or total * EPOCH_BYTES_PER_PAIR <= allowed:
        return
    k = max(range(len(counts)), key=lambda i: counts[i])  # the weight to lower: the largest share
    room = allowed // EPOCH_BYTES_PER_PAIR - (total - counts[k])
    limit = room / sizes[k]
    advice = f"give a weight under {limit:,.0f}" if limit >= 10 else \
        f"give a weight under {limit:.3g}" if limit > 1e-3 else "lower the weights"
    check_fits(f"{names[k]}.weight={weights[k]:g}: the epoch would hold {human_count(total)} pairs of indices",
               total * EPOCH_BYTES_PER_PAIR, advice)


def check_training_sizes(*, parameters: int, layers: int, d_model: int, tgt_vocab_size: int, max_tokens: int,
                         epoch_pairs: int, longest: int) -> None:
    """The model and one batch against free memory, by lower bounds (only clearly impossible sizes refuse):
    16 bytes a parameter (weights, gradients, Adam's two moments); for each token of a batch at least
    4 * d_model values a layer and 2 * V for the logits and their gradient, 2 bytes each. A batch holds
    min(train.max_tokens, the epoch's pairs x its longest pair) tokens."""
    check_fits(f"the model would have {human_count(parameters)} parameters, with gradients and Adam's moments",
               16 * parameters, "lower model.d_model, model.d_ff, the layer counts or data.vocab_size")
    tokens = min(max_tokens, epoch_pairs * longest)
    per_token = 2 * (4 * layers * d_model + 2 * tgt_vocab_size)
    allowed = budget()
    advice = "lower train.max_tokens"
    if allowed is not None and allowed > 16 * parameters:
        advice = f"give train.max_tokens under {(allowed - 16 * parameters) // per_token:,}"
    check_fits(f"train.max_tokens={max_tokens}: a batch of {human_count(tokens)} tokens would need at least "
               f"its activations", 16 * parameters + tokens * per_token, advice)


def decoding_bytes(*, multi_head: bool, layers: int, d_model: int, vocab_size: int, rows: int, sentences: int,
                   source_len: int, output_len: int, bytes_per_value: int = 4) -> int:
    """The peak of one batch's search, at its last step: rows = sentences x beam hypotheses. Transformer:
    every decoder layer's self-attention K and V for each row and output position (one layer more: the
    layer's cache is copied as it grows by a position), the cross-attention K and V per sentence and source
    position, and the step's scores over the target vocabulary (logits, log-probs, the candidates' sums:
    3 x rows x V). RNN: each layer's hidden and cell state per row, and the encoder outputs with their
    score-side form per row and source position."""
    if multi_head:
        states = (layers + 1) * 2 * rows * output_len * d_model + layers * 2 * sentences * source_len * d_model
    else:
        states = layers * 2 * rows * d_model + 2 * rows * source_len * d_model
    return bytes_per_value * (states + 3 * rows * vocab_size)


def check_decoding(*, multi_head: bool, layers: int, d_model: int, vocab_size: int, beam: int, sentences: int,
                   source_len: int, output_len: int, parallel: int = 1) -> None:
    """A search whose cache and scores would not fit in free memory, refused before it starts: one line naming
    beam, the sentences of a batch and the output length, the size it would take and the largest beam that
    fits.
    parallel: batches decoded at once (worker processes), each with its own."""
    def need(k: int) -> int:
        return parallel * decoding_bytes(multi_head=multi_head, layers=layers, d_model=d_model,
                                         vocab_size=vocab_size, rows=sentences * k, sentences=sentences,
                                         source_len=source_len, output_len=output_len)

    if need(beam) <= SMALL_SEARCH_BYTES:
        return
    allowed = budget()
    if allowed is None or need(beam) <= allowed:
        return
    fits = max((k for k in (beam // 2 ** i for i in range(1, 40)) if k >= 1 and need(k) <= allowed), default=0)
    advice = (f"lower beam (a beam of {fits} fits){' or batch_size' if sentences > 1 else ''}" if fits else
              "lower batch_size (or max_tokens)" if sentences > 1 else "give a shorter input or a smaller model")
    where = f" in each of {parallel} workers" if parallel > 1 else ""
    batch = f"{sentences} sentences in a batch" if sentences > 1 else "1 sentence"
    check_fits(f"beam={beam} x {batch} x {output_len} output tokens: the search would hold its cache and "
               f"scores{where}", need(beam), advice)

"""Data parallelism inside one process (train.micro_batch_workers = N): each micro-batch is dealt into N
shares (every N-th sentence), and the shares run side by side in N worker threads, each thread with its
share of torch's intra-op threads. The update is the same batch's: only the sum of the shares' gradients
is taken in another order (and dropout draws other masks).

Why: the Multi30k model's ops (d_model 128, ~20-token sentences) are too small for two intra-op threads
to share well. On a 2-core CPU one process with 2 threads trained at ~6500 target tokens/s, while two
1-thread processes side by side ran at 4424 and 5066 (BENCHMARKS.md, training throughput). torchrun's processes
get that, but each holds its own torch, model, data and caches, and all-reduces the gradients; threads
share one copy of everything, and torch releases the GIL inside its ops.

What stays exact: each share's gradients come from torch.autograd.grad (never accumulated into .grad by
racing threads) and are summed into .grad in the shares' order, as consecutive backward() calls would;
each share draws its dropout masks from a generator seeded by (train.seed, step, its index in the update).
So an update is the same whatever the threads' timing: bit for bit the shares computed one after another
in one thread (tests/training/test_micro_batches.py); and a resumed run repeats it exactly without saving any
generator state.
"""

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from aiayn.errors import AiaynError


def micro_batch_seed(seed: int, step: int, index: int) -> int:
    """The dropout seed of share `index` of the update after `step` (SeedSequence mixes the three)."""
    return int(np.random.SeedSequence([seed, step, index]).generate_state(1, np.uint64)[0] >> 1)


def check_micro_batch_workers(cfg, *, distributed: bool, device: torch.device) -> None:
    """The workers' dropout is exact only where every mask comes from aiayn.cpu.dropout (the Transformer's
    residual dropout, once the trainer has prepared the model) on a CPU, and they replace torchrun's
    gradient all-reduce."""
    workers, m = cfg.train.micro_batch_workers, cfg.model
    if not workers:
        return
    why = None
    if distributed:
        why = "it does not combine with torchrun (use one or the other)"
    elif device.type != "cpu":
        why = f"it is for CPUs (this run trains on {device})"
    elif not m.multi_head:  # an RNN: its cells' dropout is torch's own
        why = f"the RNN's dropout draws from torch's shared generator (model.arch={m.arch})"
    elif m.attention_dropout:
        why = f"model.attention_dropout={m.attention_dropout:g} draws from torch's shared generator (set it 0)"
    if why:
        raise AiaynError(f"train.micro_batch_workers={workers}: {why}; or set train.micro_batch_workers=0")


def split_batch(indices, parts: int) -> list:
    """A batch's sentence indices dealt into `parts` shares, every parts-th sentence to a share (fewer
    shares when the batch has fewer sentences). make_batches sorts a batch's sentences by length, so the
    shares come out of about equal size and padding."""
    return [indices[k::parts] for k in range(min(parts, len(indices)))]


class MicroBatchWorkers:
    """A pool of `workers` threads, each running torch ops with `threads_per_worker` intra-op threads.

    OpenMP keeps a thread count per thread, but torch also keeps a process-wide one, which sizes the
    parallel regions of its own kernels in whatever thread runs them (with the caller's 2 left there, runs
    of 2 workers stopped matching 1-thread runs bit for bit, as measured). So the
    process-wide count is the workers' while they run, and the caller's again after, for its validations
    and decoding."""

    def __init__(self, *, workers: int, threads_per_worker: int):
        self.threads_per_worker = threads_per_worker
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="aiayn-micro-batch",
                                       initializer=torch.set_num_threads, initargs=(threads_per_worker,))

    def map(self, fn: Callable, items: Iterable) -> list:
        """fn over items, in the workers; the results in the items' order."""
        threads = torch.get_num_threads()
        torch.set_num_threads(self.threads_per_worker)
        try:
            return list(self.pool.map(fn, items))
        finally:
            torch.set_num_threads(threads)


def add_to_grad(params: Sequence[torch.Tensor], grads_per_share: Sequence[Sequence[torch.Tensor | None]]):
    """.grad += each share's gradients, in the shares' order (as consecutive backward() calls accumulate
    them: the first one taken as it is, the next ones added in place)."""
    for i, param in enumerate(params):
        for grads in grads_per_share:
            grad = grads[i]
            if grad is None:  # a parameter this share did not use
                continue
            if param.grad is None:
                param.grad = grad
            else:
                param.grad.add_(grad)

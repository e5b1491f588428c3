"""Native beam search in worker processes: batches decoded side by side, one process per core.

CTranslate2 runs several batches at once on a multi-core CPU (inter_threads), each on one core; this is
the native engine's counterpart. Processes rather than threads: Python's lock is held between torch
operations, and a batch-1 step is ~140 small ones, so two decoding threads mostly wait for each other
(measured here: a loop of small products ran 5x slower in two threads than one after the other); two
processes do not share it. Each worker runs one torch thread. Batches go out longest first, so that the
last ones to finish are short.

Measured on a 2-core machine (BENCHMARKS.md, decoding speed, beam 4): 2 workers decode 1.6x as
many sentences a second as one process of one thread at batch 64 over 400 sentences (cut into 8 batches
of 50 by the Translator's even_batch_size; as 7 batches of 64 the last one ran alone), 1.8x over 1000
sentences, 1.6-2.0x at batch 1; two torch threads in one process gave 1.16x. With the
objects alive at the fork frozen out of the garbage collector (below), 245-264 sentences/s at batch 64
against 197-228 without (interleaved runs), and a full collection no longer stalls the first call for
60-90 ms; peak PSS of 1000 sentences 797 -> 715 MB.
"""

import gc
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from aiayn.errors import AiaynError

log = logging.getLogger(__name__)
_model = None  # the worker process's model (set by _start)
PARENT_CHECK_S = 0.5  # how often a worker looks for its parent
MAX_REPLACEMENTS = 3  # new sets of workers within REPLACEMENT_WINDOW_S; past that the pool is down
REPLACEMENT_WINDOW_S = 600.0  # a server whose workers die every few minutes needs fewer --workers, not more forks


def _start(model, model_dir: str, device: str, use_ema: bool, parent: int, compile: bool = False,
           compute_type: str = "float32") -> None:
    """Runs once in each worker process: one torch thread (forked from a process that used several, torch
    must not enter its OpenMP pool: DataLoader's workers do the same), and the model: the parent's, shared
    copy-on-write when forked, else loaded from model_dir. With `compile`, the compiled decoding step
    (aiayn.decoding.compiled): a forked worker gets the parent's (see _compile_here), a spawned one compiles
    its own here, before it takes a batch."""
    global _model
    # the parent's pid as the parent saw it: one that died while this worker started is noticed too
    threading.Thread(target=_exit_with, args=(parent,), name="aiayn-parent-watch", daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the caller ends us
    import torch

    torch.set_num_threads(1)
    if model is None:
        from aiayn.checkpoint import load_checkpoint
        from aiayn.cpu import prepare_for_cpu
        from aiayn.device import keep_freed_memory

        keep_freed_memory()
        model = prepare_for_cpu(load_checkpoint(Path(model_dir), device, use_ema)[0], compute_type)
    from aiayn.decoding.compiled import CompiledDecoder

    if isinstance(model, CompiledDecoder):  # forked from a parent that compiled it: ready
        _model = model
    elif compile:  # spawned: compile here
        _model = CompiledDecoder(model.eval())
        _model.warm_up()  # its steps serve every beam size
    else:
        _model = model.eval()


def _exit_with(parent: int, every_s: float = PARENT_CHECK_S) -> None:
    """Ends this worker once its parent is gone. A parent that dies without shutting the pool down (killed,
    out of memory, or `aiayn serve` stopped by SIGTERM: uvicorn re-raises the signal after its graceful
    shutdown, so no exit hook runs) leaves its workers waiting on their task queue for ever, each holding
    a model's memory (seen: 14 such workers, 5 GB, after a series of bench/serve_batching.py runs). POSIX
    only: on Windows getppid() stays the same when the parent dies, so there this watch never fires."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(0)


def model_kind() -> str:
    """What a worker decodes with: "Transformer", "RNNSeq2Seq", or "CompiledDecoder" (tests, diagnostics)."""
    return type(_model).__name__


def _pid() -> int:
    time.sleep(0.05)  # long enough that each worker takes one of the start-up pings
    return os.getpid()


def _search(sources: list[list[int]], params, prefixes: list[list[int]]) -> list:
    """One batch in a worker: source ids (with </s>) -> per sentence its n-best Hypotheses (no maps)."""
    import torch

    from aiayn.decoding.batches import pad_batch
    from aiayn.decoding.beam import beam_search
    from aiayn.decoding.compiled import CompiledDecoder

    compiled = isinstance(_model, CompiledDecoder)
    device = torch.device("cpu") if compiled else next(_model.parameters()).device
    with torch.inference_mode():
        return beam_search(_model, pad_batch(sources, params.pad_id, device), params, prefixes,
                           step_candidates=_model.step_candidates if compiled else None)


def _compile_here(model):
    """The model's compiled decoding step, compiled in this process for forked workers: they share its
    code and its frozen (packed) weights, as they share the model's. Compiled in each worker instead, two
    processes held copies of the weights of their own, and 2 workers decoded 16% fewer sentences a second
    than 2 eager ones at batch 64 (231 against 274; BENCHMARKS.md, decoding speed); and each compiled for
    tens of seconds. With
    one torch thread, as the workers run: inductor fixes a kernel's thread count when it compiles it."""
    import torch

    from aiayn.decoding.compiled import CompiledDecoder

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        decoder = CompiledDecoder(model.eval())
        decoder.warm_up()
    finally:
        torch.set_num_threads(threads)
    return decoder


def _closed() -> AiaynError:
    return AiaynError("the decoding worker processes were closed (Translator.close): load the model again")


class WorkersDown(AiaynError):
    """The worker processes died more often than they may be replaced: this pool decodes no more (a server
    answers 503; its /api/health says so)."""


def _shutdown(executors: list) -> None:
    for executor in executors:
        executor.shutdown(wait=True, cancel_futures=True)
    executors.clear()


class WorkerPool:
    """`workers` processes, each decoding one batch at a time with the model.

    On Linux the workers are forked from this process and share its model's weights (start-up well under a
    second; no re-import of the caller's script). Elsewhere they are spawned and each loads the model from
    model_dir, and, as with any spawned process, the caller's script must guard its entry point with
    `if __name__ == "__main__":`.

    A worker that dies (the out-of-memory killer, kill -9) breaks the whole executor: Python ends the other
    workers and fails every batch in flight. The next search() then starts a new set of workers, the same
    way, and decodes its batches on them, once more; after MAX_REPLACEMENTS sets within
    REPLACEMENT_WINDOW_S, the pool is down (WorkersDown). alive() says how many workers run now."""

    def __init__(self, *, model, model_dir: Path, workers: int, device: str = "cpu", use_ema: bool = False,
                 start_method: str | None = None, compile: bool = False, compute_type: str = "float32"):
        """start_method: "fork" or "spawn" (default: fork on Linux, spawn elsewhere; tests spawn on Linux).
        compile: the workers decode with a compiled step (aiayn.decoding.compiled), compiled here before a
        fork (shared by the workers), else by each spawned worker as it starts. compute_type: a spawned
        worker's products (aiayn.cpu.compute_types); forked workers take the model's as it is."""
        if start_method not in (None, "fork", "spawn"):
            raise ValueError(f"start_method {start_method!r}: give \"fork\", \"spawn\" or None")
        self.workers = workers
        self._fork = (start_method or ("fork" if sys.platform.startswith("linux") else "spawn")) == "fork"
        if self._fork and compile:  # compiled once, here, and shared by the forked workers (see _compile_here)
            model = _compile_here(model)
        self._initargs = (model if self._fork else None, str(model_dir), str(device), use_ema, os.getpid(), compile,
                          compute_type)
        self._lock = threading.Lock()  # one replacement at a time (the server's batch threads share the pool)
        self._replacements: list[float] = []  # when each new set of workers was started (time.monotonic)
        self._down: str | None = None  # why the pool decodes no more
        self._executors: list[ProcessPoolExecutor] = []  # the current one, for the finalizer below
        # Shut down (and wait for the executor's manager thread) when this pool is collected: an executor
        # merely dropped shuts down on that thread while the interpreter may be exiting, and Python 3.11's
        # exit hook then writes to the thread's closed pipe ("OSError: Bad file descriptor", seen in a run).
        self._close = weakref.finalize(self, _shutdown, self._executors)
        self._pool = self._start_executor()
        self._wait_ready()

    def _start_executor(self) -> ProcessPoolExecutor:
        if self._fork:  # Python's recipe for forked workers: the objects alive now (the model's, torch's: ~170k)
            gc.collect()  # go to the permanent generation, so that no collection walks them again, here
            gc.freeze()  # or in a worker, where walking them also copies the pages the worker shares
        executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(
            "fork" if self._fork else "spawn"), initializer=_start, initargs=self._initargs)
        self._executors[:] = [executor]
        return executor

    def _wait_ready(self, timeout: float = 300.0) -> None:
        """Starts every worker and waits until each has taken the model, so that the first request (or a
        benchmark's clock) does not pay for start-up. A worker that fails to start closes the pool."""
        seen: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(seen) < self.workers:
            pings = [self._pool.submit(_pid) for _ in range(self.workers)]
            try:
                seen.update(p.result(timeout=max(0.0, deadline - time.monotonic())) for p in pings)
            except BrokenProcessPool:
                self.close()
                raise AiaynError(f"a decoding worker process died as it started (out of memory, or see any error "
                                 f"above): run with fewer workers than {self.workers}, or without --workers") from None
            except TimeoutError:
                for process in list(self._pool._processes.values()):  # stuck: shutdown would wait for them
                    process.kill()
                self.close()
                raise AiaynError(f"decoding workers: only {len(seen)} of {self.workers} started in {timeout:.0f} s; "
                                 f"run with fewer --workers, or without") from None

    def alive(self) -> int:
        """Worker processes running now (a server's /api/health reports it): all of them, or fewer after one
        died and until the next search() replaces them, or 0 when the pool is down or closed."""
        pool = self._pool
        processes = getattr(pool, "_processes", None) or {}
        return 0 if pool is None or pool._broken else sum(p.is_alive() for p in list(processes.values()))

    @property
    def down(self) -> str | None:
        """Why this pool decodes no more (its workers died too often), or None."""
        return self._down

    def search(self, batches: list[list[list[int]]], params, prefixes: list[list[list[int]]]) -> list[list]:
        """Batches of source ids (each a list of sentences) and their prefixes -> per batch, per sentence its
        n-best Hypotheses, in the order given. The longest batches start first; on an error (e.g. the time
        budget) the batches not started are cancelled and the error is raised. When a worker dies, the
        batches are decoded again by a new set of workers (once)."""
        for _ in range(2):
            pool = self._pool  # one read: a server's other batch thread may replace it meanwhile
            if pool is None:
                raise WorkersDown(self._down) if self._down else _closed()
            try:
                return self._search_on(pool, batches, params, prefixes)
            except BrokenProcessPool:  # at submit or in a result: this or an earlier call lost a worker
                self._replace(pool)
        raise WorkersDown(f"a decoding worker process died twice on the same {sum(map(len, batches))} sentences "
                          f"(out of memory?); the workers were started again: send fewer or shorter sentences")

    def _search_on(self, pool: ProcessPoolExecutor, batches, params, prefixes) -> list[list]:
        order = sorted(range(len(batches)), key=lambda b: -len(batches[b]) * max(map(len, batches[b])))
        futures: dict[int, Future] = {}
        try:
            for b in order:
                futures[b] = pool.submit(_search, batches[b], params, prefixes[b])
            return [futures[b].result() for b in range(len(batches))]
        except RuntimeError as err:  # at submit: "cannot schedule new futures after shutdown"
            if isinstance(err, BrokenProcessPool):
                raise
            raise _closed() from err
        finally:
            for future in futures.values():
                future.cancel()

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A new set of workers in place of the `broken` executor's, unless another thread started one
        already; WorkersDown past MAX_REPLACEMENTS within REPLACEMENT_WINDOW_S."""
        with self._lock:
            if self._pool is not broken:  # replaced (or closed, or down) by another thread meanwhile
                return
            now = time.monotonic()
            self._replacements = [t for t in self._replacements if now - t < REPLACEMENT_WINDOW_S]
            broken.shutdown(wait=True, cancel_futures=True)
            if len(self._replacements) >= MAX_REPLACEMENTS:
                self._pool, self._down = None, (
                    f"the decoding worker processes died {len(self._replacements) + 1} times in "
                    f"{REPLACEMENT_WINDOW_S:.0f} s (out of memory, or killed) and are no longer replaced: restart "
                    f"with fewer workers than {self.workers}, or without --workers")
                log.error("%s", self._down)
                raise WorkersDown(self._down)
            self._replacements.append(now)
            log.warning("a decoding worker process died (out of memory, or killed): starting %d new workers "
                        "(%d of at most %d in %.0f s)", self.workers, len(self._replacements), MAX_REPLACEMENTS,
                        REPLACEMENT_WINDOW_S)
            self._pool = self._start_executor()
            try:
                self._wait_ready()
            except AiaynError as err:  # the new workers did not start: the pool is closed
                self._down = str(err)
                raise WorkersDown(self._down) from None

    def close(self) -> None:
        self._close()  # once: later calls do nothing
        self._pool = None

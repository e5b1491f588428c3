"""What every route works with: the model (fixed when the app is created), the server's bounds, and the two
queues in front of the model: the admission gate (maps, steps, scores: single jobs on the model's thread)
and the batcher (plain translations, decoded together)."""

import sys
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

from aiayn.decoding.engines import Capabilities
from aiayn.errors import AiaynError
from aiayn.web.alignment import DEFAULT_HEAD, AlignmentHead, alignment_head
from aiayn.web.batching import Batcher
from aiayn.web.guards import Admission
from aiayn.web.info import model_info
from aiayn.web.limits import GIL_SWITCH_S, MAX_BATCH_WORK, MAX_SOURCE_TOKENS, MAX_TEXT, Limits
from aiayn.web.plain import decode_plain


@dataclass(frozen=True, kw_only=True)
class Served:
    """translator: the model the app serves; engine: its engine's name (shown by /api/info and /api/health);
    capabilities: what that engine can do (without attention_maps: the plain endpoints only, no maps, no step
    view and no page); aligned_by: the head of the page's word alignment; info: the model panel (GET /api/info),
    computed once; executors: the threads the jobs run on, shut down with the app."""

    translator: object
    limits: Limits
    engine: str
    capabilities: Capabilities
    admission: Admission
    batcher: Batcher
    aligned_by: AlignmentHead
    info: dict
    executors: frozenset[Executor]

    @property
    def langs(self) -> tuple[str | None, str | None]:
        """The model's (source, target) languages, when its run named them."""
        return self.info.get("src_lang"), self.info.get("tgt_lang")

    @asynccontextmanager
    async def lifespan(self, app):
        # The decoding thread holds the GIL between torch calls; the event loop waits up to one switch
        # interval per hand-over. Measured with heavy requests in flight (bench/load_test.py): /api/health
        # max 17-21 ms at 1 ms against 61-73 ms at the default 5 ms, with the same decoding throughput.
        previous = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        try:
            yield
        finally:
            sys.setswitchinterval(previous)
            for executor in self.executors:
                executor.shutdown(wait=False, cancel_futures=True)


def serve(translator, limits: Limits, alignment: str | None) -> Served:
    """The model behind its queues. alignment: the head of the word alignment the page overlays
    (--alignment-head's forms; None: the last layer's mean), resolved here, once ("best" ranks the heads)."""
    capabilities = translator.backend.capabilities
    if alignment and not capabilities.attention_maps:
        raise AiaynError("--alignment-head chooses the head of the page's word alignment, which needs the maps "
                         "of --engine native: drop it, or serve with --engine native")
    aligned_by = alignment_head(translator, alignment) if capabilities.attention_maps else DEFAULT_HEAD
    # one thread for every job on this process's model: maps, steps, sampling, and plain batches when the
    # model decodes here; they take turns on it
    pool = ThreadPoolExecutor(max_workers=limits.running, thread_name_prefix="aiayn-decode")
    # Plain batches go to the translator's worker processes (or CTranslate2's inter_threads) when it has
    # several: one batch each, from threads of their own that only wait; what needs this process's model
    # (sampling) still takes its turn on `pool`.
    in_flight = translator.parallel_batches
    batch_pool = pool if in_flight == 1 else ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="aiayn-batch")
    batcher = Batcher(partial(decode_plain, translator, None if batch_pool is pool else pool), batch_pool,
                      max_batch=limits.max_batch, max_work=MAX_BATCH_WORK, max_wait_s=limits.max_wait_s,
                      rejoin_s=limits.rejoin_s, capacity=limits.queued, in_flight=in_flight)
    info = {**model_info(translator, MAX_SOURCE_TOKENS, MAX_TEXT), "engine": capabilities.name}
    return Served(translator=translator, limits=limits, engine=capabilities.name, capabilities=capabilities,
                  admission=Admission(pool, limits.running + limits.waiting), batcher=batcher,
                  aligned_by=aligned_by, info=info, executors=frozenset({pool, batch_pool}))


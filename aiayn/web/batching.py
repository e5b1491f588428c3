"""Dynamic batching for the server: plain translations (no attention maps) that arrive together are
decoded in one Translator.translate call, which costs little more than one sentence alone.

How a batch forms (the bookkeeping runs on the event loop; only the decoding runs on the worker thread):
- every sentence of a request is an Item in one queue, in arrival order, with the key of its options
  (the beam): one translate call takes one beam, so items with other keys never share a call;
- the oldest item opens the next batch. If it arrived less than `max_wait_s` ago (the model was idle),
  the batcher waits until it is that old, so that the requests sent at about the same time join it;
  when the model was busy, the items are older than that already. When a batch ends while other
  requests wait, the next batch waits `rejoin_s` for the clients just answered to send their next
  sentence, so that concurrent clients share one batch rather than alternate in two;
- the batch takes the queued items with the oldest one's key, in arrival order, up to `max_batch`
  sentences and `max_work` units of work (source subwords x beam): a batch of the longest sentences is
  small, so every batch costs about the same and fits the time budget of one request;
- while a batch decodes, new requests queue, so under load the batches grow by themselves;
- with worker processes (a Translator with workers=N, or CTranslate2's inter_threads N), N batches decode
  at once, one per worker, each started as soon as a worker is free: a worker never waits for another's
  batch to end, and the clients of a batch that ended come back while the other worker still decodes.
Bounds: at most `capacity` sentences queued or decoding; a request that does not fit is refused at
once (Busy: the app answers 503 with Retry-After). A request cancelled while its sentences wait (its
client left) takes them out of the queue: they cost no decoding.
Failures: when a batch's call fails (a time budget run out, an error that the checks before the queue
missed, a bug), its sentences are decoded again one at a time, so each request gets its own result or
its own error, never a neighbour's."""

import asyncio
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from aiayn.web.guards import Busy

log = logging.getLogger(__name__)


@dataclass(eq=False)  # identity: two requests for the same text are two items
class Item:
    key: Hashable  # the options every item of a batch shares
    text: str
    work: int  # source subwords x beam: what the sentence costs the model, roughly
    arrival: float  # loop.time()
    future: asyncio.Future


class Batcher:
    def __init__(self, decode: Callable[[Hashable, list[str]], list], executor, *, max_batch: int, max_work: int,
                 max_wait_s: float, rejoin_s: float, capacity: int, in_flight: int = 1):
        """decode(key, texts) -> one result per text, in order; it runs on `executor` (the model's worker
        thread, shared with the app's other model jobs) and may raise for the whole call. in_flight: batches
        decoding at once (the executor has as many threads): 1 for a model in this process; one per worker
        process of a pooled Translator, each batch decoded by one worker."""
        self.decode, self.executor = decode, executor
        self.max_batch, self.max_work, self.capacity = max_batch, max_work, capacity
        self.max_wait_s, self.rejoin_s, self.in_flight = max_wait_s, rejoin_s, in_flight
        self.queue: list[Item] = []  # waiting, oldest first
        self.admitted = 0  # sentences queued or decoding (tests watch it)
        self._driver: asyncio.Task | None = None
        self._wake: asyncio.Future | None = None  # set when items arrive while the driver waits
        self._rejoin: list[float] = []  # a rejoin deadline for each slot freed while requests waited

    async def translate(self, key: Hashable, texts: list[str], works: list[int]) -> list:
        """The results of `texts`, decoded with the options `key`, in order; Busy at once if they do not
        fit in the queue. The first error of one of them is raised (its other sentences are dropped)."""
        if self.admitted + len(texts) > self.capacity:
            raise Busy()
        loop = asyncio.get_running_loop()
        items = [Item(key, text, work, loop.time(), loop.create_future()) for text, work in zip(texts, works)]
        self.admitted += len(items)
        self.queue.extend(items)
        self._start_driver(loop)
        try:
            return await asyncio.gather(*(item.future for item in items))
        except BaseException:  # cancelled (the client left), or one sentence failed: the rest are not wanted
            self._withdraw(items)
            raise

    def _withdraw(self, items: list[Item]) -> None:
        """Take the items still queued out of the queue (items being decoded are given back by the driver)."""
        gone = {id(item) for item in items}
        kept = [item for item in self.queue if id(item) not in gone]
        self.admitted -= len(self.queue) - len(kept)
        self.queue = kept
        for item in items:
            item.future.cancel()  # a no-op for the ones already done

    def _start_driver(self, loop) -> None:
        # One driver task at a time starts the batches while the queue has items or batches run, then ends;
        # the next request starts a new one. A driver of another event loop is dead (the test client runs a
        # loop per request). A driver waiting for a batch to end is woken: a slot may be free.
        if self._driver is None or self._driver.done() or self._driver.get_loop() is not loop:
            self._driver = loop.create_task(self._drive())
        elif self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _drive(self) -> None:
        loop = asyncio.get_running_loop()
        running: set[asyncio.Task] = set()  # at most in_flight batches
        self._rejoin = []
        try:
            while self.queue or running:
                timeout, free = None, self.in_flight - len(running)  # None: until a batch ends or items arrive
                if self.queue and free:
                    # the model was idle: a moment for company; or this slot's batch just ended while others
                    # waited: a moment for its clients to come back (a slot freed with nothing queued has no
                    # such wait); a full batch goes at once
                    rejoin = min(self._rejoin) if len(self._rejoin) >= free else 0.0
                    timeout = max(self.queue[0].arrival + self.max_wait_s, rejoin) - loop.time()
                    if timeout <= 0 or len(self.queue) >= self.max_batch:
                        if rejoin:
                            self._rejoin.remove(rejoin)
                        # free slots share the queue: 32 requests at once on 2 idle workers are 2 batches of 16
                        share = -(-len(self.queue) // free)
                        running.add(loop.create_task(self._run(self._take(self.queue[0].key, share))))
                        continue
                self._wake = loop.create_future()
                done, _ = await asyncio.wait(running | {self._wake}, timeout=timeout,
                                             return_when=asyncio.FIRST_COMPLETED)
                self._wake.cancel()  # a no-op when it woke us
                running -= done
        finally:  # cancelled (the event loop is closing): the batches running are answered by their tasks
            for task in running:
                task.cancel()

    async def _run(self, batch: list[Item]) -> None:
        """Decode one batch on the executor, answer its requests, and, when others wait, give its slot a
        rejoin deadline."""
        loop = asyncio.get_running_loop()
        try:
            outcomes = await loop.run_in_executor(self.executor, self._decode_each, batch[0].key,
                                                  [item.text for item in batch])
        except asyncio.CancelledError:  # the event loop is closing
            self._settle(batch, [RuntimeError("the server is stopping")] * len(batch))
            raise
        except Exception as err:  # the executor was shut down: the server is stopping
            outcomes = [err] * len(batch)
        self._settle(batch, outcomes)
        # Requests still queued mean concurrent clients. The ones just answered often send their next
        # sentence at once (a document sent sentence by sentence); without waiting for them, the clients split
        # into two groups that alternate in half-size batches, and smaller batches decode slower. Decided
        # here, as the batch is answered: a client that was quicker than that is not a crowd.
        if self.queue:
            self._rejoin.append(loop.time() + self.rejoin_s)

    def _take(self, key: Hashable, size: int) -> list[Item]:
        """The next batch: the oldest item and the queued items with its key, oldest first, within the
        bounds of size (at most `size` and max_batch) and work. The oldest item always goes, so no request
        waits for ever."""
        batch, work, rest, size = [], 0, [], min(size, self.max_batch)
        for item in self.queue:
            fits = item.key == key and len(batch) < size and (not batch or work + item.work <= self.max_work)
            if fits:
                batch.append(item)
                work += item.work
            else:
                rest.append(item)
        self.queue = rest
        return batch

    def _settle(self, batch: list[Item], outcomes: list) -> None:
        self.admitted -= len(batch)
        for item, outcome in zip(batch, outcomes, strict=True):
            if item.future.done():  # its request is gone
                continue
            if isinstance(outcome, BaseException):
                item.future.set_exception(outcome)
            else:
                item.future.set_result(outcome)

    def _decode_each(self, key: Hashable, texts: list[str]) -> list:
        """On the worker thread: the batch's results, or, when its call fails, each sentence's own result
        or exception (an exception object in its place) from decoding it alone."""
        try:
            return self.decode(key, texts)
        except Exception as err:
            if len(texts) == 1:
                return [err]
            log.info("a batch of %d sentences failed (%s: %s); decoding them one at a time", len(texts),
                     type(err).__name__, err)
        outcomes = []
        for text in texts:
            try:
                outcomes.extend(self.decode(key, [text]))
            except Exception as err:
                outcomes.append(err)
        return outcomes

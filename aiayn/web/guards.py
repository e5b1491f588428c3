"""What keeps the server standing under load and abuse: a request-body limit enforced while the body
arrives (larger for the paths given one), and an admission gate in front of the model (a bounded number of
decoding jobs, run on the model's worker thread so the event loop stays free for cheap requests such as
/api/health). The plain translations have a bounded queue of their own: aiayn.web.batching."""

import asyncio
import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor


async def send_json(send, status: int, payload: dict, headers: tuple = ()) -> None:
    """A complete JSON response at the ASGI level (for middleware, below the framework)."""
    body = json.dumps(payload).encode()
    raw_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   *((name.encode(), value.encode()) for name, value in headers)]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Pure ASGI middleware: 413 for a request body over `max_bytes`, or over `per_path[path]` for the
    paths it names (an endpoint that takes many texts at once).

    A declared Content-Length is checked before anything is read (the fast path). A chunked body has no
    length up front, so `receive` is wrapped and counts the bytes as they arrive: the moment the count
    passes the limit, the 413 goes out and the app is told the client left, so it stops reading. Nothing
    is buffered here, and the server reads the socket only as fast as the app asks (uvicorn pauses reading
    past 64 KiB), so an oversized body costs about the limit plus 128 KiB of memory, whatever its size."""

    def __init__(self, app, max_bytes: int, per_path: dict[str, int] | None = None):
        self.app, self.max_bytes, self.per_path = app, max_bytes, per_path or {}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.per_path.get(scope["path"], self.max_bytes)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and not length.isdigit():
            return await send_json(send, 400, {"error": "Content-Length is not a number"})
        if length is not None and int(length) > limit:
            return await self._refuse(send, limit)
        received, refused, started = 0, False, False

        async def counted_receive():
            nonlocal received, refused
            if refused:  # never read more of a refused body
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not started:  # an app that already answers keeps its answer
                        await self._refuse(send, limit)
                    return {"type": "http.disconnect"}  # the app stops reading and gives up
            return message

        async def guarded_send(message):
            nonlocal started
            if refused and not started:  # after our 413, whatever the app answers has nowhere to go
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted_receive, guarded_send)

    async def _refuse(self, send, limit: int) -> None:
        # connection: close, because the rest of the body is never read
        await send_json(send, 413, {"error": f"request body over {limit} bytes"},
                        (("connection", "close"),))


class Busy(Exception):
    """Every running and waiting place of the admission gate is taken."""


class Admission:
    """At most `capacity` jobs admitted at once: running on `executor` (the model's worker thread(s)) or
    queued for it; a job beyond that is refused at once (Busy) rather than queued without bound.

    A place is given back when the job itself ends, not when its request does: a client that leaves
    while its job runs does not free a place that the model is still busy with (a job still queued is
    cancelled instead)."""

    def __init__(self, executor: ThreadPoolExecutor, capacity: int):
        self.capacity = capacity
        self.admitted = 0  # jobs queued or running (tests watch it)
        self._lock = threading.Lock()  # jobs end on worker threads
        self._pool = executor

    async def run(self, job):
        """job(), on a worker thread, once admitted; Busy at once if it cannot be."""
        with self._lock:
            if self.admitted >= self.capacity:
                raise Busy()
            self.admitted += 1
        future = self._pool.submit(job)
        future.add_done_callback(self._release)
        return await asyncio.wrap_future(future)  # cancelling the request cancels a job still queued

    def _release(self, _: Future) -> None:
        with self._lock:
            self.admitted -= 1

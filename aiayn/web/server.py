"""How `aiayn serve` runs the app: uvicorn (h11), with a guard on every connection against slow and
crowding clients.

uvicorn bounds the size of a request's headers (h11: 16 KiB) and the idle time between two requests
(timeout_keep_alive, reset by any byte received), but not how long a request may take to arrive, nor how
many connections one client holds. A client that trickles one byte every few seconds kept its connection
for ever, and 100 of them held every file descriptor of a server limited to 100. So each connection here:
- must bring its request headers within HEADER_TIMEOUT_S (from its opening, or from the end of its previous
  answer) and its body within BODY_TIMEOUT_S after them; past that it gets a 408 and is closed. Once the
  request is read, no clock runs: how long the answer takes is the app's bounds' business;
- counts against its client address: past MAX_CLIENT_CONNECTIONS at once, a new one gets a 503 and is closed;
- counts against the server's total, the open-file limit less FD_RESERVE (the model's files, the worker
  pipes, and room for connections accepted in one go before they are counted): at the total, the
  connection that has waited longest for its request is closed to make room (one whose request the app is
  answering never is), so a new client is served while slow ones crowd the server.
The event loop's "socket.accept() out of system resource" error (EMFILE) is logged at most once a minute:
Python's accept loop reports it once per accept try, up to the listen backlog (2048) tries each time the
socket is ready, and such a log grew by 154 MB in 70 s. The guard's own closings are logged the same way."""

import asyncio
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from http import HTTPStatus

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0  # request line and headers: a few hundred bytes, milliseconds for any live client
BODY_TIMEOUT_S = 30.0  # the largest body taken (MAX_BATCH_BODY, 193 KB) at under 10 KB/s
MAX_CLIENT_CONNECTIONS = 64  # at once from one address: a browser opens 6, the load benchmarks 32
FD_RESERVE = 128  # file descriptors kept from connections (the server holds about 30 of its own)
LOG_EVERY_S = 60.0  # at most one line per kind of event in this time
ACCEPT_ERROR = "socket.accept() out of system resource"  # asyncio's message


@dataclass(frozen=True)
class ConnectionLimits:
    """The connection guard's bounds (defaults: the constants; tests lower them)."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    per_client: int = MAX_CLIENT_CONNECTIONS  # 0: no cap (behind a proxy, every client has its address)
    total: int | None = None  # None: the open-file limit less FD_RESERVE


def open_file_cap() -> int:
    """Connections the open-file limit leaves room for (at least 16)."""
    try:
        import resource
    except ImportError:  # Windows: no such limit; the selector's own is 512 sockets
        return 512 - FD_RESERVE
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65_536 if soft == resource.RLIM_INFINITY else max(16, soft - FD_RESERVE)


class Throttled:
    """Warnings of a kind at most once per `every_s`, each saying how many such events it stands for."""

    def __init__(self, every_s: float = LOG_EVERY_S):
        self.every_s, self.counts, self.last = every_s, Counter(), {}

    def warning(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        now = time.monotonic()
        if kind in self.last and now - self.last[kind] < self.every_s:
            return
        log.warning("%s: %d since the last such line (one at most every %g s)", message, self.counts[kind],
                    self.every_s)
        self.last[kind], self.counts[kind] = now, 0


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the bounds of the module's docstring. Subclassed per server by
    guarded_protocol, which sets the class attributes below; everything runs on the event loop."""

    limits: ConnectionLimits
    total: int  # connections at once
    per_client: Counter  # open connections by client address
    waiting: dict  # connections whose request has not fully arrived, the longest-waiting first
    throttled: Throttled

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._phase, self._timer = None, None
        self._address = self.client[0] if self.client else ""
        self.per_client[self._address] += 1  # given back in connection_lost, refused or not
        cap = self.limits.per_client
        if cap and self.per_client[self._address] > cap:
            self.throttled.warning("per-client", f"connections refused from {self._address}: over {cap} at once")
            return self._end(503, f"too many connections from your address (at most {cap} at once): close some "
                                  f"and retry")
        if len(self.connections) > self.total:
            oldest = next(iter(self.waiting), None)
            if oldest is None:  # every connection is being answered
                self.throttled.warning("total", f"connections refused: {self.total} open, all being answered")
                return self._end(503, "the server is at its connection limit: retry in a moment")
            self.throttled.warning("total", f"connections closed to make room (at {self.total} open, the one "
                                            f"waiting longest for its request)")
            oldest._end(408, "this connection waited too long for its request and its place was needed")
        self._follow()

    def connection_lost(self, exc) -> None:
        super().connection_lost(exc)
        self._set_phase(None)
        self.per_client[self._address] -= 1
        if not self.per_client[self._address]:
            del self.per_client[self._address]

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # kept alive: the next request's headers are due

    def _follow(self) -> None:
        """Set the clock from h11's view of the client: its headers due (IDLE), its body due (SEND_BODY), or
        its request read (no clock)."""
        phase = None if self.transport.is_closing() else {h11.IDLE: "headers", h11.SEND_BODY: "body"}.get(
            self.conn.their_state)
        if phase != self._phase:
            self._set_phase(phase)

    def _set_phase(self, phase: str | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if phase is None:
            self.waiting.pop(self, None)
        elif phase == "headers":  # a new request: to the end of the line (a body keeps its request's place)
            self.waiting.pop(self, None)
            self.waiting[self] = None
        if phase is not None:
            seconds = self.limits.header_timeout_s if phase == "headers" else self.limits.body_timeout_s
            self._timer = self.loop.call_later(seconds, self._expired, phase, seconds)
        self._phase = phase

    def _expired(self, phase: str, seconds: float) -> None:
        self._timer = None
        self.throttled.warning("timeout", f"connections closed because their request {phase} took over {seconds:g} s")
        self._end(408, f"the request {phase} did not arrive within {seconds:g} s")

    def _end(self, status: int, message: str) -> None:
        """Answer `status` with one line, unless an answer is under way, and close the connection."""
        self._set_phase(None)
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            body = json.dumps({"error": message}).encode()
            self.transport.write(f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json"
                                 f"\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """A protocol class for one server: its bounds and its book of connections."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "limits": limits, "total": limits.total or open_file_cap(), "per_client": Counter(), "waiting": {},
        "throttled": Throttled()})


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, throttled: Throttled) -> None:
    """Log the loop's accept errors (out of file descriptors) through `throttled`; other errors as before."""
    previous = loop.get_exception_handler()

    def handler(loop, context):
        if context.get("message") == ACCEPT_ERROR:
            return throttled.warning("accept", f"connections not accepted ({context.get('exception')}): raise "
                                               f"the open-file limit (ulimit -n) or lower the load")
        if previous is None:
            loop.default_exception_handler(context)
        else:
            previous(loop, context)

    loop.set_exception_handler(handler)


class GuardedServer(uvicorn.Server):
    """uvicorn's server with the accept errors of its event loop logged through its protocol's Throttled."""

    async def startup(self, sockets=None):
        quiet_accept_errors(asyncio.get_running_loop(), self.config.http.throttled)
        await super().startup(sockets)


def guarded_server(app, *, host: str, port: int, limits: ConnectionLimits = ConnectionLimits(),
                   log_level: str | None = None) -> GuardedServer:
    """A server for `app` on host:port whose connections are guarded within `limits`; .run() serves until
    stopped (SIGINT, SIGTERM), and .started then says whether it started (uvicorn logs why not)."""
    return GuardedServer(uvicorn.Config(app, host=host, port=port, http=guarded_protocol(limits),
                                        log_level=log_level))

"""The connection guard of `aiayn serve` (aiayn.web.server): slow requests are cut off, one client's
connections are capped, at the server's total the slowest connection makes room, and the event loop's
accept errors do not flood the log. A real server on loopback with a two-route app (the guard does not
depend on the model), with bounds lowered to fractions of a second."""

import asyncio
import errno
import logging
import socket
import time
from contextlib import contextmanager

import pytest
from fastapi import FastAPI

from aiayn.web.server import ACCEPT_ERROR, ConnectionLimits, Throttled, guarded_server, quiet_accept_errors
from tests.serving import free_port, running

FAST = ConnectionLimits(header_timeout_s=0.4, body_timeout_s=0.4, per_client=3, total=6)


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/api/health")
    async def health():
        return {"status": "ok"}

    @app.post("/echo")
    async def echo(body: dict):
        return body

    return app


@contextmanager
def serving(limits: ConnectionLimits):
    port = free_port()
    with running(guarded_server(_app(), host="127.0.0.1", port=port, limits=limits, log_level="warning")):
        yield port


def connect(port: int, address: str = "127.0.0.1") -> socket.socket:
    """A connection from `address` (any of 127.0.0.0/8 is this machine: a client of its own address)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(address, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or 5 s pass)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def health_status(port: int, address: str) -> bytes:
    with connect(port, address) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        return answer(sock).split(b"\r\n")[0]


def test_slow_headers_get_a_408_and_are_closed():
    with serving(FAST) as port, connect(port) as sock:
        start = time.monotonic()
        for byte in b"GET /api/health HTTP/1.1\r\n":  # one byte every 50 ms: never done in time
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # closed while we trickle
                break
            time.sleep(0.05)
        reply = answer(sock)
        assert reply.startswith(b"HTTP/1.1 408") and b"headers did not arrive within 0.4 s" in reply
        assert time.monotonic() - start < 3


def test_a_slow_body_gets_a_408_and_a_prompt_one_is_answered():
    with serving(FAST) as port:
        with connect(port) as sock:
            sock.sendall(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: 100\r\n\r\n{\"te")
            reply = answer(sock)
            assert reply.startswith(b"HTTP/1.1 408") and b"body did not arrive within 0.4 s" in reply
        with connect(port) as sock:  # headers and body in time: answered, then the keep-alive clock runs
            sock.sendall(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 8\r\n"
                         b"\r\n{\"a\": 1}")
            first, _, rest = answer(sock).partition(b'{"a":1}')  # the answer, then (kept alive) a second
            assert first.startswith(b"HTTP/1.1 200")  # request's headers are due and never come
            assert rest.startswith(b"HTTP/1.1 408"), rest


def test_one_address_holds_at_most_its_cap_and_others_are_served():
    with serving(FAST) as port:
        held = [connect(port) for _ in range(FAST.per_client)]
        with connect(port) as extra:
            reply = answer(extra)
        assert reply.startswith(b"HTTP/1.1 503") and b"too many connections from your address" in reply
        assert health_status(port, "127.0.0.2") == b"HTTP/1.1 200 OK"
        held.pop().close()
        time.sleep(0.05)
        assert health_status(port, "127.0.0.1") == b"HTTP/1.1 200 OK"  # a freed place is taken again
        for sock in held:
            sock.close()


def test_at_the_total_the_connection_waiting_longest_makes_room():
    limits = ConnectionLimits(header_timeout_s=30, body_timeout_s=30, per_client=0, total=4)
    with serving(limits) as port:
        idle = [connect(port, f"127.0.0.{i + 10}") for i in range(limits.total)]
        time.sleep(0.1)
        assert health_status(port, "127.0.0.2") == b"HTTP/1.1 200 OK"
        reply = answer(idle[0])
        assert reply.startswith(b"HTTP/1.1 408") and b"its place was needed" in reply
        for sock in idle:
            sock.close()


def test_accept_errors_are_logged_once_a_minute(caplog):
    """Python's accept loop reports running out of file descriptors once per accept try, up to the listen
    backlog each time the socket is ready: 2048 tracebacks a second under uvicorn's default backlog."""

    async def flood():
        loop = asyncio.get_running_loop()
        quiet_accept_errors(loop, Throttled())
        for _ in range(2048):
            loop.call_exception_handler({"message": ACCEPT_ERROR, "exception": OSError(errno.EMFILE, "Too many open "
                                                                                                     "files")})
        loop.call_exception_handler({"message": "something else"})

    with caplog.at_level(logging.WARNING):
        asyncio.run(flood())
    accept_lines = [r for r in caplog.records if "connections not accepted" in r.getMessage()]
    assert len(accept_lines) == 1 and "ulimit -n" in accept_lines[0].getMessage()
    assert any(r.getMessage() == "something else" for r in caplog.records), "other errors are logged as before"


@pytest.mark.parametrize("value", ["-1"])
def test_cli_refuses_a_negative_client_cap(value, capsys):
    from aiayn.cli import main

    assert main(["serve", "--model", "nowhere", "--max-client-connections", value]) != 0
    assert "--max-client-connections -1" in capsys.readouterr().err

"""A free loopback port, and an ASGI app served on it from a thread for the length of a `with` block."""

import socket
import threading
import time
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(server):
    """Runs a uvicorn Server in a daemon thread until the `with` block ends (it waits for the start)."""
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serving(app):
    """Runs `app` under uvicorn on 127.0.0.1 in a daemon thread -> its base URL; stops it on exit."""
    import uvicorn

    port = free_port()
    with running(uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))):
        yield f"http://127.0.0.1:{port}"
